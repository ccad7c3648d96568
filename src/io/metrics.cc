// Edit distance and error rates (mona/io/metrics.h).
#include "mona/io/metrics.h"

#include <algorithm>
#include <limits>

#include "mona/core/error.h"

namespace mona::io {

int64_t edit_distance(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  // Keep the shorter sequence along the row so memory is O(min(|a|, |b|)).
  const auto& longer = a.size() >= b.size() ? a : b;
  const auto& shorter = a.size() >= b.size() ? b : a;
  const std::size_t n = shorter.size();
  std::vector<int64_t> row(n + 1);
  for (std::size_t j = 0; j <= n; ++j) row[j] = static_cast<int64_t>(j);
  for (std::size_t i = 1; i <= longer.size(); ++i) {
    int64_t diag = row[0];  // D[i-1][j-1]
    row[0] = static_cast<int64_t>(i);
    for (std::size_t j = 1; j <= n; ++j) {
      const int64_t up = row[j];  // D[i-1][j]
      const int64_t sub = diag + (longer[i - 1] == shorter[j - 1] ? 0 : 1);
      row[j] = std::min({up + 1, row[j - 1] + 1, sub});
      diag = up;
    }
  }
  return row[n];
}

void ErrorCounts::add(const ErrorCounts& other) {
  token_errors += other.token_errors;
  ref_tokens += other.ref_tokens;
  sequence_errors += other.sequence_errors;
  sequences += other.sequences;
}

double ErrorCounts::token_error_rate() const {
  if (ref_tokens == 0) {
    return token_errors == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  }
  return static_cast<double>(token_errors) / static_cast<double>(ref_tokens);
}

double ErrorCounts::sequence_error_rate() const {
  if (sequences == 0) return 0.0;
  return static_cast<double>(sequence_errors) / static_cast<double>(sequences);
}

ErrorCounts score(const std::vector<std::string>& hypothesis,
                  const std::vector<std::vector<std::string>>& references) {
  detail::check(!references.empty(),
                "score: references: expected at least one reference, got none");
  int64_t best_dist = -1;
  int64_t best_len = 0;
  for (const auto& ref : references) {
    const int64_t d = edit_distance(hypothesis, ref);
    const int64_t len = static_cast<int64_t>(ref.size());
    if (best_dist < 0 || d < best_dist || (d == best_dist && len > best_len)) {
      best_dist = d;
      best_len = len;
    }
  }
  ErrorCounts c;
  c.token_errors = best_dist;
  c.ref_tokens = best_len;
  c.sequence_errors = best_dist == 0 ? 0 : 1;
  c.sequences = 1;
  return c;
}

void LatencyCounts::add(const LatencyCounts& other) {
  proportion_sum += other.proportion_sum;
  lagging_sum += other.lagging_sum;
  sequences += other.sequences;
  tokens += other.tokens;
  early_tokens += other.early_tokens;
}

double LatencyCounts::average_proportion() const {
  return sequences == 0 ? 0.0 : proportion_sum / static_cast<double>(sequences);
}

double LatencyCounts::average_lagging() const {
  return sequences == 0 ? 0.0 : lagging_sum / static_cast<double>(sequences);
}

double LatencyCounts::early_token_share() const {
  return tokens == 0 ? 0.0 : static_cast<double>(early_tokens) / static_cast<double>(tokens);
}

LatencyCounts latency(const std::vector<int64_t>& read, int64_t input_length) {
  detail::check(input_length >= 1, "latency: input_length: expected >= 1, got ", input_length);
  LatencyCounts c;
  if (read.empty()) return c;
  const double n = static_cast<double>(input_length);
  const double y = static_cast<double>(read.size());
  const double rate = y / n;  // r = |y| / n output tokens per input element
  double proportion = 0, lagging = 0;
  int64_t tau = 0;
  for (std::size_t i = 0; i < read.size(); ++i) {
    const int64_t g = read[i];
    detail::check(g >= 1 && g <= input_length, "latency: read[", i, "]: expected in [1, ", input_length,
                  "] (the input length), got ", g);
    detail::check(i == 0 || g >= read[i - 1], "latency: read[", i, "]: expected >= read[", i - 1, "] = ",
                  read[i - 1], " (tokens are emitted in order), got ", g);
    proportion += static_cast<double>(g);
    if (tau == 0) {  // AL sums up to and including the first token that read everything
      lagging += static_cast<double>(g) - static_cast<double>(i) / rate;
      if (g == input_length) tau = static_cast<int64_t>(i) + 1;
    }
    if (g < input_length) ++c.early_tokens;
  }
  if (tau == 0) tau = static_cast<int64_t>(read.size());
  c.proportion_sum = proportion / (n * y);
  c.lagging_sum = lagging / static_cast<double>(tau);
  c.sequences = 1;
  c.tokens = static_cast<int64_t>(read.size());
  return c;
}

std::vector<std::pair<size_t, size_t>> matched_tokens(const std::vector<std::string>& hypothesis,
                                                      const std::vector<std::string>& reference) {
  const size_t n = hypothesis.size(), m = reference.size();
  // D[i][j]: edit distance of the first i hypothesis and first j reference tokens.
  std::vector<int64_t> d((n + 1) * (m + 1));
  auto at = [&](size_t i, size_t j) -> int64_t& { return d[i * (m + 1) + j]; };
  for (size_t i = 0; i <= n; ++i) at(i, 0) = static_cast<int64_t>(i);
  for (size_t j = 0; j <= m; ++j) at(0, j) = static_cast<int64_t>(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      at(i, j) = std::min({at(i - 1, j) + 1, at(i, j - 1) + 1,
                           at(i - 1, j - 1) + (hypothesis[i - 1] == reference[j - 1] ? 0 : 1)});
    }
  }
  std::vector<std::pair<size_t, size_t>> pairs;
  for (size_t i = n, j = m; i > 0 || j > 0;) {
    if (i > 0 && j > 0 && hypothesis[i - 1] == reference[j - 1] && at(i, j) == at(i - 1, j - 1)) {
      pairs.emplace_back(--i, --j);
    } else if (i > 0 && j > 0 && at(i, j) == at(i - 1, j - 1) + 1) {
      --i, --j;
    } else if (i > 0 && at(i, j) == at(i - 1, j) + 1) {
      --i;
    } else {
      --j;
    }
  }
  std::reverse(pairs.begin(), pairs.end());
  return pairs;
}

void EmissionDelays::add(const EmissionDelays& other) { ms.insert(ms.end(), other.ms.begin(), other.ms.end()); }

double EmissionDelays::mean() const {
  if (ms.empty()) return 0;
  double sum = 0;
  for (double v : ms) sum += v;
  return sum / static_cast<double>(ms.size());
}

double EmissionDelays::quantile(double q) const {
  detail::check(q >= 0 && q <= 1, "EmissionDelays::quantile: q must lie in [0, 1], got ", q);
  if (ms.empty()) return 0;
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  const double position = q * static_cast<double>(sorted.size() - 1);
  const size_t below = static_cast<size_t>(position);
  if (below + 1 >= sorted.size()) return sorted.back();
  return sorted[below] + (position - static_cast<double>(below)) * (sorted[below + 1] - sorted[below]);
}

EmissionDelays emission_delays(const std::vector<std::string>& hypothesis, const std::vector<double>& emitted_ms,
                               const std::vector<std::string>& reference,
                               const std::vector<double>& reference_end_ms) {
  detail::check(emitted_ms.size() == hypothesis.size(), "emission_delays: emitted_ms: expected one time per hypothesis word (",
                hypothesis.size(), "), got ", emitted_ms.size());
  detail::check(reference_end_ms.size() == reference.size(),
                "emission_delays: reference_end_ms: expected one time per reference word (", reference.size(), "), got ",
                reference_end_ms.size());
  EmissionDelays delays;
  for (const auto& [i, j] : matched_tokens(hypothesis, reference)) delays.ms.push_back(emitted_ms[i] - reference_end_ms[j]);
  return delays;
}

}  // namespace mona::io
