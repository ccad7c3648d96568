// Greedy and beam search; see include/mona/nn/search.h.
#include "mona/nn/search.h"
#include "mona/core/error.h"
#include "mona/data/tokens.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

namespace mona::nn {
namespace {
using data::kBos;
using data::kEos;

struct Candidate {
  double score;
  size_t parent;
  int64_t token;
};

// The best `k` (log-probability, token) pairs of a [V] log-prob vector, best first;
// ties go to the lower token id, as in greedy argmax.
// `skip`: a token left out (SearchOptions::eos_only_after_input / eos_only_at_last_entry:
// </s> where it may not be chosen).
std::vector<std::pair<double, int64_t>> top_k(const at::Tensor& log_probs, int64_t k, int64_t skip = -1) {
  const at::Tensor lp = log_probs.to(torch::kDouble).contiguous();
  const double* v = lp.data_ptr<double>();
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < lp.numel(); ++i) {
    if (i != skip) idx.push_back(i);
  }
  const auto V = static_cast<int64_t>(idx.size());
  k = std::min(k, V);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int64_t a, int64_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
  std::vector<std::pair<double, int64_t>> out;
  for (int64_t i = 0; i < k; ++i) out.emplace_back(v[idx[i]], idx[i]);
  return out;
}

int64_t best_token(const at::Tensor& log_probs, int64_t skip = -1) { return top_k(log_probs, 1, skip)[0].second; }

}  // namespace

void SearchOptions::validate() const {
  MONA_CHECK(beam >= 0, "SearchOptions: beam must be >= 0 (0 = greedy), got ", beam);
  MONA_CHECK(std::isfinite(prune_margin) && prune_margin > 0, "SearchOptions: prune_margin must be finite and > 0, got ", prune_margin);
  MONA_CHECK(std::isfinite(length_ratio) && length_ratio > 0 && length_ratio <= kMaxLengthRatio,
             "SearchOptions: length_ratio must lie in (0, ", kMaxLengthRatio, "], got ", length_ratio);
  MONA_CHECK(length_bonus >= 0 && length_bonus <= kMaxLengthBonus, "SearchOptions: length_bonus must lie in [0, ",
             kMaxLengthBonus, "], got ", length_bonus);
}

int64_t SearchOptions::max_tokens(int64_t entries) const {
  return static_cast<int64_t>(std::floor(length_ratio * static_cast<double>(entries))) + length_bonus;
}

OnlineSearch::OnlineSearch(SearchOptions options) : options_(options) { options_.validate(); }

void OnlineSearch::reset(const Decoder& decoder) {
  live_.clear();
  finished_.clear();
  Hypothesis h;
  h.state = decoder.initial_state();
  live_.push_back(std::move(h));
  done_ = false;
  blocked_size_ = -1;
  blocked_finished_ = false;
}

int64_t OnlineSearch::limit(const OnlineMemory& memory) const {
  return options_.max_tokens(memory.size());
}

bool OnlineSearch::blocked_on(const OnlineMemory& memory) const {
  return !done_ && blocked_size_ == memory.size() && blocked_finished_ == memory.finished();
}

const Hypothesis& OnlineSearch::best() const {
  // Done: the finished ones (the live ones only if none finished). Still searching: the live
  // ones, which may yet score above every finished one (scores only fall, so a finished
  // hypothesis is final, but it is not the search's answer until done).
  const std::vector<Hypothesis>& pool =
      done_ ? (!finished_.empty() ? finished_ : live_) : (!live_.empty() ? live_ : finished_);
  MONA_CHECK(!pool.empty(), "OnlineSearch::best: reset() was not called");
  return *std::max_element(pool.begin(), pool.end(),
                           [](const Hypothesis& a, const Hypothesis& b) { return a.score < b.score; });
}

bool OnlineSearch::eos_allowed(const OnlineMemory& memory, const DecoderStep& step) const {
  if (options_.eos_only_at_last_entry) {
    return memory.finished() && (step.status == core::ScanStatus::kExhausted ||
                                 step.attention.index >= memory.size() - 1);
  }
  return !options_.eos_only_after_input || memory.finished();
}

int64_t OnlineSearch::first_needed(const Attention& attention, const OnlineMemory& memory) const {
  if (done_) return memory.size();
  int64_t first = memory.size();
  for (const Hypothesis& h : live_) first = std::min(first, attention.first_needed(h.state.attention));
  return first;
}

bool OnlineSearch::advance(Decoder& decoder, const OnlineMemory& memory) {
  MONA_CHECK(!live_.empty() || done_, "OnlineSearch::advance: reset() was not called");
  if (done_) return false;
  torch::NoGradGuard no_grad;
  const bool progress = options_.beam == 0 ? advance_greedy(decoder, memory) : advance_beam(decoder, memory);
  if (!done_) {
    blocked_size_ = memory.size();
    blocked_finished_ = memory.finished();
  }
  return progress;
}

bool OnlineSearch::advance_greedy(Decoder& decoder, const OnlineMemory& memory) {
  Hypothesis& h = live_[0];
  bool progress = false;
  while (!done_) {
    if (static_cast<int64_t>(h.tokens.size()) >= limit(memory)) {
      if (!memory.finished()) return progress;  // wait for input
      h.finished = true;
      finished_.push_back(h);
      done_ = true;
      break;
    }
    const int64_t prev = h.tokens.empty() ? kBos : h.tokens.back();
    DecoderStep step = decoder.hard_step(prev, h.state, memory);
    h.state.attention = step.next.attention;  // keep the scan position even when blocked
    if (step.status == core::ScanStatus::kNeedMoreInput) return progress;
    progress = true;
    const int64_t y = best_token(step.log_probs, eos_allowed(memory, step) ? -1 : kEos);
    h.score += step.log_probs[y].item<double>();
    h.state = step.next;
    if (y == kEos) {
      h.finished = h.ended_by_eos = true;
      finished_.push_back(h);
      done_ = true;
      break;
    }
    h.tokens.push_back(y);
    h.positions.push_back(step.attention.index);
  }
  return progress;
}

bool OnlineSearch::advance_beam(Decoder& decoder, const OnlineMemory& memory) {
  bool progress = false;
  while (!done_) {
    // 1. Expand every live hypothesis (or keep its pending expansion).
    for (Hypothesis& h : live_) {
      if (h.pending) continue;
      if (static_cast<int64_t>(h.tokens.size()) >= limit(memory)) {
        if (!memory.finished()) return progress;  // wait for input
        continue;  // handled below: ended by the guard
      }
      const int64_t prev = h.tokens.empty() ? kBos : h.tokens.back();
      DecoderStep step = decoder.hard_step(prev, h.state, memory);
      h.state.attention = step.next.attention;
      if (step.status == core::ScanStatus::kNeedMoreInput) return progress;
      h.pending = std::move(step);
    }
    progress = true;
    // 2. Hypotheses at the length limit of a finished input end here.
    std::vector<Hypothesis> expandable;
    for (Hypothesis& h : live_) {
      if (h.pending) {
        expandable.push_back(std::move(h));
      } else {
        h.finished = true;
        finished_.push_back(std::move(h));
      }
    }
    // 3. Candidates: top `beam` tokens of each, then rank and prune by the margin.
    std::vector<Candidate> cands;
    for (size_t k = 0; k < expandable.size(); ++k) {
      for (auto& [lp, tok] : top_k(expandable[k].pending->log_probs, options_.beam, eos_allowed(memory, *expandable[k].pending) ? -1 : kEos)) {
        cands.push_back({expandable[k].score + lp, k, tok});
      }
    }
    std::stable_sort(cands.begin(), cands.end(),
                     [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
    if (static_cast<int64_t>(cands.size()) > options_.beam) cands.resize(static_cast<size_t>(options_.beam));
    std::vector<Hypothesis> next;
    const double best_score = cands.empty() ? -INFINITY : cands[0].score;
    for (const Candidate& c : cands) {
      if (c.score < best_score - options_.prune_margin) continue;
      const Hypothesis& parent = expandable[c.parent];
      Hypothesis h;
      h.tokens = parent.tokens;
      h.positions = parent.positions;
      h.score = c.score;
      h.state = parent.pending->next;
      if (c.token == kEos) {
        h.finished = h.ended_by_eos = true;
        finished_.push_back(std::move(h));
      } else {
        h.tokens.push_back(c.token);
        h.positions.push_back(parent.pending->attention.index);
        next.push_back(std::move(h));
      }
    }
    live_ = std::move(next);
    // 4. Done when nothing is live or no live hypothesis can beat the best finished one
    // (scores only decrease as tokens are added).
    double best_finished = -INFINITY;
    for (const auto& f : finished_) best_finished = std::max(best_finished, f.score);
    double best_live = -INFINITY;
    for (const auto& l : live_) best_live = std::max(best_live, l.score);
    if (live_.empty() || best_finished >= best_live) done_ = true;
  }
  return progress;
}

Hypothesis decode_expected(Decoder& decoder, const Memory& memory, const SearchOptions& options) {
  options.validate();
  MONA_CHECK(memory.batch() == 1, "decode_expected: expected a memory with B = 1, got ", memory.batch());
  torch::NoGradGuard no_grad;
  struct State {
    Hypothesis hyp;
    at::Tensor h, c, alignment;
  };
  const int64_t T = memory.lengths.defined() ? memory.lengths[0].item<int64_t>() : memory.in_len();
  const int64_t max_len = options.max_tokens(T);
  const DecoderState init = decoder.initial_state();
  State s0{Hypothesis{}, init.h, init.c, decoder.attention->initial_state(memory)};
  const int64_t beam = std::max<int64_t>(options.beam, 1);
  std::vector<State> live{s0};
  std::vector<Hypothesis> finished;
  while (!live.empty()) {
    struct Exp {
      std::vector<std::pair<double, int64_t>> top;
      at::Tensor h, c, alignment;
      int64_t position;
    };
    std::vector<Exp> exps;
    std::vector<State> keep;
    for (State& st : live) {
      if (static_cast<int64_t>(st.hyp.tokens.size()) >= max_len) {
        st.hyp.finished = true;
        finished.push_back(st.hyp);
        continue;
      }
      Exp e{{}, st.h, st.c, st.alignment, -1};
      at::Tensor w;
      const int64_t prev = st.hyp.tokens.empty() ? kBos : st.hyp.tokens.back();
      at::Tensor lp = decoder.expected_step(prev, e.h, e.c, e.alignment, memory, &w);
      e.position = w.numel() > 0 ? w.view({-1}).argmax().item<int64_t>() : -1;
      e.top = top_k(lp, beam);
      exps.push_back(std::move(e));
      keep.push_back(st);
    }
    std::vector<Candidate> cands;
    for (size_t k = 0; k < exps.size(); ++k) {
      for (auto& [lp, tok] : exps[k].top) cands.push_back({keep[k].hyp.score + lp, k, tok});
    }
    std::stable_sort(cands.begin(), cands.end(),
                     [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
    if (static_cast<int64_t>(cands.size()) > beam) cands.resize(static_cast<size_t>(beam));
    std::vector<State> next;
    const double best_score = cands.empty() ? -INFINITY : cands[0].score;
    for (const Candidate& c : cands) {
      if (options.beam > 0 && c.score < best_score - options.prune_margin) continue;
      State st{keep[c.parent].hyp, exps[c.parent].h, exps[c.parent].c, exps[c.parent].alignment};
      st.hyp.score = c.score;
      if (c.token == kEos) {
        st.hyp.finished = st.hyp.ended_by_eos = true;
        finished.push_back(st.hyp);
      } else {
        st.hyp.tokens.push_back(c.token);
        st.hyp.positions.push_back(exps[c.parent].position);
        next.push_back(std::move(st));
      }
    }
    live = std::move(next);
    double best_finished = -INFINITY, best_live = -INFINITY;
    for (const auto& f : finished) best_finished = std::max(best_finished, f.score);
    for (const auto& l : live) best_live = std::max(best_live, l.hyp.score);
    if (best_finished >= best_live) break;
  }
  MONA_CHECK(!finished.empty(), "decode_expected: no hypothesis finished");
  return *std::max_element(finished.begin(), finished.end(),
                           [](const Hypothesis& a, const Hypothesis& b) { return a.score < b.score; });
}

}  // namespace mona::nn
