// Gradient estimators of 004 sections 2.2-2.4; see include/mona/nn/cb_estimators.h.
#include "mona/nn/cb_estimators.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "check.h"
#include "mona/nn/conditional_bernoulli.h"
#include "mona/core/error.h"

namespace mona::nn {

// ---------------------------------------------------------------------------------------
MovingAverageBaseline::MovingAverageBaseline(double decay) : decay_(decay) {
  MONA_CHECK(decay >= 0 && decay < 1, "mona::nn::MovingAverageBaseline: decay must lie in ",
              "[0, 1), got ", decay);
}

at::Tensor MovingAverageBaseline::values(int64_t n) const {
  at::Tensor v = at::zeros({n}, at::TensorOptions().dtype(at::kDouble));
  auto* p = v.data_ptr<double>();
  for (int64_t i = 0; i < n && i < static_cast<int64_t>(value_.size()); ++i) p[i] = value_[i];
  return v;
}

void MovingAverageBaseline::update(const at::Tensor& returns, const at::Tensor& mask) {
  constexpr const char* fn = "mona::nn::MovingAverageBaseline::update";
  detail::check_tensor(returns, fn, "returns", 2, "[R, n]");
  MONA_CHECK(mask.defined(), fn, ": mask must be a defined tensor");
  MONA_CHECK(mask.device().is_cpu(), fn, ": mask: expected a CPU tensor, got device ",
             mask.device());
  MONA_CHECK(mask.sizes() == returns.sizes(), fn, ": mask: expected sizes [R, n] = ",
             returns.sizes(), " (those of returns), got ", mask.sizes());
  MONA_CHECK(mask.scalar_type() == at::kBool, fn, ": mask: expected dtype bool, got ",
             mask.scalar_type());
  const at::Tensor r = returns.detach().to(at::kDouble).contiguous();
  const at::Tensor m = mask.to(at::kDouble).contiguous();
  const int64_t n = r.size(1);
  if (static_cast<int64_t>(value_.size()) < n) {
    value_.resize(static_cast<size_t>(n), 0.0);
    seen_.resize(static_cast<size_t>(n), 0);
  }
  const at::Tensor cnt = m.sum(0), tot = (r * m).sum(0);
  const double* c = cnt.data_ptr<double>();
  const double* s = tot.data_ptr<double>();
  for (int64_t i = 0; i < n; ++i) {
    if (c[i] <= 0) continue;
    const double mean = s[i] / c[i];
    auto& v = value_[static_cast<size_t>(i)];
    v = seen_[static_cast<size_t>(i)] ? decay_ * v + (1 - decay_) * mean : mean;
    seen_[static_cast<size_t>(i)] = 1;
  }
}

namespace {

// A checked problem with every row repeated M times (rows r = b * M + m).
struct Problem {
  at::Tensor x;     // [R, T], differentiable (repeat of logits)
  at::Tensor E;     // [R, U, T]
  at::Tensor n;     // [R] int64 frames
  at::Tensor L;     // [R] int64 labels
  at::Tensor il;    // [R] or undefined (when in_lens was undefined)
  int64_t B = 0, M = 1, R = 0, T = 0, U = 0, K = 0, group = 1;
};

Problem prepare(const char* fn, const at::Tensor& logits, const at::Tensor& log_emit,
                const CbEstimatorOptions& opts, const at::Tensor& in_lens,
                const at::Tensor& out_lens, bool sampling) {
  detail::check_tensor(logits, fn, "logits", 2, "[B, T]");
  detail::check_tensor(log_emit, fn, "log_emit", 3, "[B, U, T]");
  const int64_t B = logits.size(0), T = logits.size(1), U = log_emit.size(1);
  MONA_CHECK(log_emit.size(0) == B && log_emit.size(2) == T, fn,
              ": log_emit: expected sizes [B, U, T] with B = ", B, ", T = ", T,
              " (those of logits), got ", log_emit.sizes());
  MONA_CHECK(log_emit.scalar_type() == logits.scalar_type(), fn, ": log_emit: expected dtype ",
              logits.scalar_type(), " (that of logits), got ", log_emit.scalar_type());
  const at::Tensor il = detail::check_lengths(in_lens, fn, "in_lens", B, T);
  at::Tensor ol = detail::check_lengths(out_lens, fn, "out_lens", B, U);
  const auto lopt = at::TensorOptions().dtype(at::kLong);
  if (!ol.defined()) ol = at::full({B}, U, lopt);
  const at::Tensor n = il.defined() ? il : at::full({B}, T, lopt);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t lb = ol.data_ptr<int64_t>()[b], nb = n.data_ptr<int64_t>()[b];
    MONA_CHECK(lb <= nb, fn, ": out_lens[", b, "] = ", lb,
                " (labels L) must be <= the number of frames ", nb,
                " (in_lens, default T): the alignment needs one frame per label");
  }
  if (sampling) {
    MONA_CHECK(opts.samples >= 1, fn, ": opts.samples (M) must be >= 1, got ", opts.samples);
    MONA_CHECK(opts.baseline != CbBaseline::kMovingAverage || opts.moving_average, fn,
                ": opts.baseline = kMovingAverage needs opts.moving_average (a "
                "MovingAverageBaseline), got null");
    MONA_CHECK(opts.group >= 1 && B % opts.group == 0, fn, ": opts.group must be >= 1 and ",
                "divide the batch size ", B, ", got ", opts.group);
    MONA_CHECK(opts.baseline != CbBaseline::kLeaveOneOut || opts.samples * opts.group >= 2, fn,
                ": opts.baseline = kLeaveOneOut needs opts.samples * opts.group >= 2, got ",
                opts.samples, " * ", opts.group);
    MONA_CHECK(opts.temperature > 0 && std::isfinite(opts.temperature), fn,
                ": opts.temperature must be finite and > 0, got ", opts.temperature);
  }
  Problem p;
  p.B = B;
  p.M = sampling ? opts.samples : 1;
  p.group = sampling ? opts.group : 1;
  p.R = B * p.M;
  p.T = T;
  p.U = U;
  p.K = B == 0 ? 0 : ol.max().item<int64_t>();
  p.x = p.M == 1 ? logits.contiguous() : logits.repeat_interleave(p.M, 0).contiguous();
  p.E = p.M == 1 ? log_emit.contiguous() : log_emit.repeat_interleave(p.M, 0).contiguous();
  p.n = n.repeat_interleave(p.M, 0).contiguous();
  p.L = ol.repeat_interleave(p.M, 0).contiguous();
  if (il.defined()) p.il = p.n;
  return p;
}

// Backward order (004 eq. 25): frames reversed within T_b, labels within L_b.
Problem reversed(const Problem& p) {
  Problem q = p;
  const auto lopt = at::TensorOptions().dtype(at::kLong);
  const at::Tensor t = at::arange(p.T, lopt).unsqueeze(0).expand({p.R, p.T});
  const at::Tensor nn = p.n.unsqueeze(1);
  const at::Tensor it = at::where(t < nn, nn - 1 - t, t);
  q.x = p.x.gather(1, it).contiguous();
  at::Tensor e = p.E.gather(2, it.unsqueeze(1).expand({p.R, p.U, p.T}));
  const at::Tensor l = at::arange(p.U, lopt).unsqueeze(0).expand({p.R, p.U});
  const at::Tensor ll = p.L.unsqueeze(1);
  const at::Tensor il = at::where(l < ll, ll - 1 - l, l);
  q.E = e.gather(1, il.unsqueeze(2).expand({p.R, p.U, p.T})).contiguous();
  return q;
}

at::Tensor frame_mask(const Problem& p) {  // [R, T] bool, t < T_r
  return at::arange(p.T, at::TensorOptions().dtype(at::kLong)).unsqueeze(0) < p.n.unsqueeze(1);
}
at::Tensor label_mask(const Problem& p, int64_t K) {  // [R, K] bool, l < L_r
  return at::arange(K, at::TensorOptions().dtype(at::kLong)).unsqueeze(0) < p.L.unsqueeze(1);
}

// Positions of the highs of b [R, T] (increasing) as [R, K]; padding 0.
at::Tensor high_positions(const Problem& p, const at::Tensor& b) {
  if (p.K == 0) return at::zeros({p.R, 0}, at::TensorOptions().dtype(at::kLong));
  const at::Tensor t = at::arange(p.T, at::TensorOptions().dtype(at::kLong)).unsqueeze(0);
  const at::Tensor key = at::where(b.detach() > 0.5, t, t + p.T);
  at::Tensor pos = std::get<0>(key.sort(1)).narrow(1, 0, p.K);
  return at::where(label_mask(p, p.K), pos, at::zeros_like(pos));
}

// Label rewards R_l = log_emit[l, t_l] [R, K] (differentiable in E), padding 0.
at::Tensor label_rewards(const Problem& p, const at::Tensor& pos) {
  if (p.K == 0) return at::zeros({p.R, 0}, p.E.options());
  const at::Tensor r = p.E.narrow(1, 0, p.K).gather(2, pos.unsqueeze(2)).squeeze(2);
  return at::where(label_mask(p, p.K), r, at::zeros_like(r));
}

// Frame rewards R_t = b_t log_emit[l_t, t] [R, T] with l_t the index of the high at t.
at::Tensor frame_rewards(const Problem& p, const at::Tensor& b) {
  if (p.U == 0) return at::zeros({p.R, p.T}, p.E.options());
  const at::Tensor l = (b.detach().cumsum(1) - 1).clamp(0, p.U - 1).to(at::kLong);
  const at::Tensor e = p.E.gather(1, l.unsqueeze(1)).squeeze(1);
  return b.detach() * e;
}

at::Tensor reward_to_go(const at::Tensor& r) { return r.flip({1}).cumsum(1).flip({1}); }

// Baseline for returns G [R, P] (detached) under the options; mask [R, P] bool.
at::Tensor baseline_for(const Problem& p, const CbEstimatorOptions& opts, const at::Tensor& G) {
  const int64_t P = G.size(1);
  switch (opts.baseline) {
    case CbBaseline::kNone:
      return at::zeros_like(G);
    case CbBaseline::kMovingAverage:
      return opts.moving_average->values(P).to(G.scalar_type()).unsqueeze(0).expand_as(G);
    case CbBaseline::kLeaveOneOut: {
      const int64_t n = p.M * p.group;
      const at::Tensor g = G.reshape({p.R / n, n, P});
      return ((g.sum(1, true) - g) / double(n - 1)).reshape({p.R, P});
    }
  }
  return at::zeros_like(G);
}

// sum_p (G_p - baseline_p) * d s_p: a term whose value is 0 and whose gradient is the score
// function part of the estimator. s [R, P] step log-probs, G [R, P] returns, mask [R, P].
at::Tensor score_term(const Problem& p, const CbEstimatorOptions& opts, const at::Tensor& s,
                      const at::Tensor& G, const at::Tensor& mask) {
  const at::Tensor Gd = G.detach();
  const at::Tensor adv = (Gd - baseline_for(p, opts, Gd)) * mask.to(Gd.scalar_type());
  if (opts.baseline == CbBaseline::kMovingAverage) opts.moving_average->update(Gd, mask);
  return (adv * (s - s.detach())).sum(1);
}

at::Tensor finish(const Problem& p, const at::Tensor& objective, const at::Tensor& reward,
                  const at::Tensor& log_pl, CbEstimatorStats* stats) {
  if (stats) {
    stats->reward = p.R ? reward.detach().to(at::kDouble).mean().item<double>() : 0.0;
    stats->log_prob_length =
        (p.R && log_pl.defined()) ? log_pl.detach().to(at::kDouble).mean().item<double>() : 0.0;
  }
  if (p.R == 0) return (objective.sum() * 0).neg();
  return -objective.mean();
}

bool forward_order(const CbEstimatorOptions& opts) {
  switch (opts.direction) {
    case CbDirection::kForward: return true;
    case CbDirection::kBackward: return false;
    case CbDirection::kAlternate: return opts.step % 2 == 0;
  }
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------------------
at::Tensor reinforce_bernoulli_loss(const at::Tensor& logits, const at::Tensor& log_emit,
                                    core::Rng& rng, const CbEstimatorOptions& opts,
                                    const at::Tensor& in_lens, const at::Tensor& out_lens,
                                    CbEstimatorStats* stats) {
  const Problem p = prepare("mona::nn::reinforce_bernoulli_loss", logits, log_emit, opts,
                            in_lens, out_lens, true);
  // Luo et al.'s sampler: Bernoulli draws, forced once the count of highs is decided.
  const at::Tensor xd = p.x.detach().to(at::kDouble).contiguous();
  at::Tensor bd = at::zeros({p.R, p.T}, xd.options());
  const double* xp = xd.data_ptr<double>();
  double* bp = bd.data_ptr<double>();
  const int64_t* np = p.n.data_ptr<int64_t>();
  const int64_t* Lp = p.L.data_ptr<int64_t>();
  for (int64_t r = 0; r < p.R; ++r) {
    const int64_t n = np[r], L = Lp[r];
    int64_t highs = 0;
    for (int64_t t = 0; t < n; ++t) {
      bool high;
      if (highs == L) {
        high = false;
      } else if (n - t == L - highs) {
        high = true;
      } else {
        high = rng.uniform() < 1.0 / (1.0 + std::exp(-xp[r * p.T + t]));
      }
      bp[r * p.T + t] = high ? 1.0 : 0.0;
      highs += high;
    }
  }
  const at::Tensor b = bd.to(p.x.scalar_type());
  const at::Tensor mask = frame_mask(p);
  // Score of every step under the unforced Bernoulli (as in eq. 1).
  const at::Tensor s = at::where(mask, b * at::log_sigmoid(p.x) + (1 - b) * at::log_sigmoid(-p.x),
                                 at::zeros_like(p.x));
  const at::Tensor R = frame_rewards(p, b);
  const at::Tensor total = R.sum(1);
  const at::Tensor obj = total + score_term(p, opts, s, reward_to_go(R), mask);
  return finish(p, obj, total, {}, stats);
}

namespace {

// Shared body of the global estimators (eqs. 21, 22).
at::Tensor global_loss(const char* fn, bool draft, const at::Tensor& logits,
                       const at::Tensor& log_emit, core::Rng& rng, const CbEstimatorOptions& opts,
                       const at::Tensor& in_lens, const at::Tensor& out_lens,
                       CbEstimatorStats* stats) {
  const Problem p = prepare(fn, logits, log_emit, opts, in_lens, out_lens, true);
  const at::Tensor log_pl = poisson_binomial_log_prob(p.x, p.L, p.il);
  at::Tensor b, score;
  if (draft) {
    const CbSample smp = cb_sample_db(p.x, p.L, rng, p.il);
    b = smp.b;
    score = smp.step_log_probs.sum(1);
  } else {
    b = cb_sample_idb(p.x, p.L, rng, p.il).b;
    score = cb_log_prob(p.x, b, p.il);
  }
  const at::Tensor total = label_rewards(p, high_positions(p, b)).sum(1);
  const at::Tensor ones = at::ones({p.R, 1}, at::TensorOptions().dtype(at::kBool));
  const at::Tensor obj =
      log_pl + total + score_term(p, opts, score.unsqueeze(1), total.unsqueeze(1), ones);
  return finish(p, obj, total, log_pl, stats);
}

}  // namespace

at::Tensor cb_reinforce_loss(const at::Tensor& logits, const at::Tensor& log_emit,
                             core::Rng& rng, const CbEstimatorOptions& opts,
                             const at::Tensor& in_lens, const at::Tensor& out_lens,
                             CbEstimatorStats* stats) {
  return global_loss("mona::nn::cb_reinforce_loss", false, logits, log_emit, rng, opts, in_lens,
                     out_lens, stats);
}

at::Tensor db_reinforce_loss(const at::Tensor& logits, const at::Tensor& log_emit,
                             core::Rng& rng, const CbEstimatorOptions& opts,
                             const at::Tensor& in_lens, const at::Tensor& out_lens,
                             CbEstimatorStats* stats) {
  return global_loss("mona::nn::db_reinforce_loss", true, logits, log_emit, rng, opts, in_lens,
                     out_lens, stats);
}

at::Tensor idb_reinforce_loss(const at::Tensor& logits, const at::Tensor& log_emit,
                              core::Rng& rng, const CbEstimatorOptions& opts,
                              const at::Tensor& in_lens, const at::Tensor& out_lens,
                              CbEstimatorStats* stats) {
  const Problem p0 = prepare("mona::nn::idb_reinforce_loss", logits, log_emit, opts, in_lens,
                             out_lens, true);
  const Problem p = forward_order(opts) ? p0 : reversed(p0);
  const at::Tensor log_pl = poisson_binomial_log_prob(p.x, p.L, p.il);
  const CbSample smp = cb_sample_idb(p.x, p.L, rng, p.il);
  const at::Tensor R = frame_rewards(p, smp.b);
  const at::Tensor total = R.sum(1);
  const at::Tensor obj =
      log_pl + total + score_term(p, opts, smp.step_log_probs, reward_to_go(R), frame_mask(p));
  return finish(p, obj, total, log_pl, stats);
}

at::Tensor bb_reinforce_loss(const at::Tensor& logits, const at::Tensor& log_emit,
                             core::Rng& rng, const CbEstimatorOptions& opts,
                             const at::Tensor& in_lens, const at::Tensor& out_lens,
                             CbEstimatorStats* stats) {
  const Problem p0 = prepare("mona::nn::bb_reinforce_loss", logits, log_emit, opts, in_lens,
                             out_lens, true);
  const Problem p = forward_order(opts) ? p0 : reversed(p0);
  const at::Tensor log_pl = poisson_binomial_log_prob(p.x, p.L, p.il);
  const CbSample smp = cb_sample_bb(p.x, p.L, rng, p.il);
  const at::Tensor R = label_rewards(p, smp.positions);
  const at::Tensor total = R.sum(1);
  const at::Tensor obj = log_pl + total +
                         score_term(p, opts, smp.step_log_probs, reward_to_go(R),
                                    label_mask(p, p.K));
  return finish(p, obj, total, log_pl, stats);
}

// ---------------------------------------------------------------------------------------
at::Tensor cb_straight_through_loss(const at::Tensor& logits, const at::Tensor& log_emit,
                                    core::Rng& rng, CbRelaxation relaxation,
                                    const CbEstimatorOptions& opts, const at::Tensor& in_lens,
                                    const at::Tensor& out_lens, CbEstimatorStats* stats) {
  const Problem p = prepare("mona::nn::cb_straight_through_loss", logits, log_emit, opts,
                            in_lens, out_lens, true);
  const double lambda = opts.temperature;
  const auto lopt = at::TensorOptions().dtype(at::kLong);
  const at::Tensor log_pl = poisson_binomial_log_prob(p.x, p.L, p.il);
  const at::Tensor Q = cb_log_table(p.x, p.L, p.il);  // [R, T + 1, K + 1], differentiable
  const int64_t K = Q.size(2) - 1;
  // Q at rows t + 1, with -inf entries replaced by 0 (they are never selected below).
  const at::Tensor Qn0 = Q.narrow(1, 1, p.T);
  const at::Tensor Qn = at::where(at::isinf(Qn0), at::zeros_like(Qn0), Qn0);
  const at::Tensor ls = at::log_sigmoid(p.x), lq = at::log_sigmoid(-p.x);
  const at::Tensor Qd = Q.detach().to(at::kDouble).contiguous();
  const at::Tensor lsd = ls.detach().to(at::kDouble).contiguous();
  const at::Tensor lqd = lq.detach().to(at::kDouble).contiguous();
  const double* qd = Qd.data_ptr<double>();
  const double* lsp = lsd.data_ptr<double>();
  const double* lqp = lqd.data_ptr<double>();
  const int64_t W = K + 1, S = (p.T + 1) * W;
  const double kTiny = 1e-300;
  const int64_t* np = p.n.data_ptr<int64_t>();
  const int64_t* Lp = p.L.data_ptr<int64_t>();

  if (relaxation == CbRelaxation::kIdb) {
    // Hard path of the IDB with logistic noise D (004 eq. 31): b_t = [a_t + D_t > 0] with
    // a_t = logit P(b_t = 1 | j_t highs still to place); forced steps are constants.
    at::Tensor jd = at::zeros({p.R, p.T}, lopt), free = at::zeros({p.R, p.T}, at::kBool);
    at::Tensor D = at::zeros({p.R, p.T}, at::kDouble), bd = at::zeros({p.R, p.T}, at::kDouble);
    auto* jp = jd.data_ptr<int64_t>();
    auto* fp = free.data_ptr<bool>();
    auto* dp = D.data_ptr<double>();
    auto* bp = bd.data_ptr<double>();
    for (int64_t r = 0; r < p.R; ++r) {
      const int64_t n = np[r];
      int64_t j = Lp[r];
      for (int64_t t = 0; t < n; ++t) {
        const int64_t i = r * p.T + t;
        jp[i] = j;
        bool high;
        if (j == 0 || j == n - t) {
          high = j > 0;
        } else {
          const double* q1 = qd + r * S + (t + 1) * W;
          const double a = (lsp[i] + q1[j - 1]) - (lqp[i] + q1[j]);
          const double u = std::min(std::max(rng.uniform(), kTiny), 1.0 - 1e-16);
          dp[i] = std::log(u) - std::log1p(-u);
          high = a + dp[i] > 0;
          fp[i] = true;
        }
        bp[i] = high ? 1.0 : 0.0;
        j -= high;
      }
    }
    const auto dt = p.x.scalar_type();
    const at::Tensor b = bd.to(dt);
    const at::Tensor hi = Qn.gather(2, (jd - 1).clamp(0, K).unsqueeze(2)).squeeze(2);
    const at::Tensor lo = Qn.gather(2, jd.clamp(0, K).unsqueeze(2)).squeeze(2);
    const at::Tensor a = at::where(free, ls + hi - lq - lo, at::zeros_like(ls));
    const at::Tensor Z = at::sigmoid((a + D.to(dt)) / lambda);
    const at::Tensor bst = at::where(free, b + Z - Z.detach(), b);
    // eq. 33 with the label index of the hard sample.
    at::Tensor reward;
    if (p.U == 0) {
      reward = at::zeros({p.R}, p.x.options());
    } else {
      const at::Tensor l = (b.cumsum(1) - 1).clamp(0, p.U - 1).to(at::kLong);
      reward = (bst * p.E.gather(1, l.unsqueeze(1)).squeeze(1)).sum(1);
    }
    return finish(p, log_pl + reward, reward, log_pl, stats);
  }

  // BB drafts with Gumbel noise (004 eqs. 28-29): the r-th high (m = L - r + 1 to place)
  // among t in (t_{r-1}, T_b - m] with scores ls_t + Q[t+1, m-1] + sum_{s<t} lq_s.
  at::Tensor G = at::zeros({p.R, K, p.T}, at::kDouble);
  at::Tensor valid = at::zeros({p.R, K, p.T}, at::kBool);
  at::Tensor pos = at::zeros({p.R, K}, lopt);
  auto* gp = G.data_ptr<double>();
  auto* vp = valid.data_ptr<bool>();
  auto* pp = pos.data_ptr<int64_t>();
  std::vector<double> C(static_cast<size_t>(p.T + 1));
  for (int64_t r = 0; r < p.R; ++r) {
    const int64_t n = np[r], L = Lp[r];
    C[0] = 0;
    for (int64_t t = 0; t < n; ++t) C[static_cast<size_t>(t + 1)] = C[static_cast<size_t>(t)] + lqp[r * p.T + t];
    int64_t prev = -1;
    for (int64_t rr = 0; rr < L; ++rr) {
      const int64_t m = L - rr;
      double best = -std::numeric_limits<double>::infinity();
      int64_t arg = prev + 1;
      for (int64_t t = prev + 1; t <= n - m; ++t) {
        const int64_t i = (r * K + rr) * p.T + t;
        const double u = std::min(std::max(rng.uniform(), kTiny), 1.0 - 1e-16);
        gp[i] = -std::log(-std::log(u));
        vp[i] = true;
        const double sc = lsp[r * p.T + t] + qd[r * S + (t + 1) * W + m - 1] +
                          C[static_cast<size_t>(t)] + gp[i];
        if (sc > best) {
          best = sc;
          arg = t;
        }
      }
      pp[r * K + rr] = arg;
      prev = arg;
    }
  }
  const auto dt = p.x.scalar_type();
  const at::Tensor lmask = label_mask(p, K);                          // [R, K]
  const at::Tensor m_idx = (p.L.unsqueeze(1) - at::arange(K, lopt).unsqueeze(0) - 1).clamp(0, K);
  // Qg[r, rr, t] = Q[r, t + 1, L - rr - 1]
  const at::Tensor Qg =
      Qn.gather(2, m_idx.unsqueeze(1).expand({p.R, p.T, K})).permute({0, 2, 1});
  const at::Tensor Cx = lq.cumsum(1) - lq;                             // sum_{s < t} lq_s
  const at::Tensor score = ls.unsqueeze(1) + Qg + Cx.unsqueeze(1) + G.to(dt);
  const at::Tensor any = valid.any(2, true);
  const at::Tensor neg_inf = at::full({}, -std::numeric_limits<double>::infinity(), p.x.options());
  at::Tensor logits_z = at::where(valid, score / lambda, neg_inf);
  logits_z = at::where(any, logits_z, at::zeros_like(logits_z));
  const at::Tensor Z = at::softmax(logits_z, 2) * any.to(dt);
  const at::Tensor onehot =
      at::zeros({p.R, K, p.T}, p.x.options()).scatter_(2, pos.unsqueeze(2), 1.0) *
      lmask.unsqueeze(2).to(dt);
  const at::Tensor bst = onehot + Z - Z.detach();
  const at::Tensor reward =
      K == 0 ? at::zeros({p.R}, p.x.options()) : (bst * p.E.narrow(1, 0, K)).sum({1, 2});
  return finish(p, log_pl + reward, reward, log_pl, stats);
}

at::Tensor cb_marginal_loss(const at::Tensor& logits, const at::Tensor& log_emit,
                            const at::Tensor& in_lens, const at::Tensor& out_lens) {
  const at::Tensor ll = cb_marginal_log_likelihood(logits, log_emit, in_lens, out_lens);
  if (ll.numel() == 0) return ll.sum();
  return -ll.mean();
}

// ---------------------------------------------------------------------------------------
std::string cb_estimator_name(CbEstimator e) {
  switch (e) {
    case CbEstimator::kReinforceBernoulli: return "reinforce";
    case CbEstimator::kCb: return "cb";
    case CbEstimator::kDb: return "db";
    case CbEstimator::kIdb: return "idb";
    case CbEstimator::kBb: return "bb";
    case CbEstimator::kStraightThroughIdb: return "st-idb";
    case CbEstimator::kStraightThroughBb: return "st-bb";
    case CbEstimator::kExact: return "exact";
  }
  return "?";
}

CbEstimator parse_cb_estimator(const std::string& name) {
  constexpr CbEstimator kAll[] = {
      CbEstimator::kReinforceBernoulli, CbEstimator::kCb, CbEstimator::kDb,
      CbEstimator::kIdb, CbEstimator::kBb, CbEstimator::kStraightThroughIdb,
      CbEstimator::kStraightThroughBb, CbEstimator::kExact};
  std::string accepted;
  for (CbEstimator e : kAll) {
    const std::string e_name = cb_estimator_name(e);
    if (e_name == name) return e;
    accepted += (accepted.empty() ? "" : ", ") + e_name;
  }
  ::mona::detail::fail("mona::nn::parse_cb_estimator: unknown estimator '", name,
                       "'; expected one of ", accepted);
}

bool cb_estimator_unbiased(CbEstimator e) {
  return e != CbEstimator::kReinforceBernoulli && e != CbEstimator::kStraightThroughIdb &&
         e != CbEstimator::kStraightThroughBb;
}

at::Tensor cb_estimator_loss(CbEstimator e, const at::Tensor& logits, const at::Tensor& log_emit,
                             core::Rng& rng, const CbEstimatorOptions& opts,
                             const at::Tensor& in_lens, const at::Tensor& out_lens,
                             CbEstimatorStats* stats) {
  switch (e) {
    case CbEstimator::kReinforceBernoulli:
      return reinforce_bernoulli_loss(logits, log_emit, rng, opts, in_lens, out_lens, stats);
    case CbEstimator::kCb:
      return cb_reinforce_loss(logits, log_emit, rng, opts, in_lens, out_lens, stats);
    case CbEstimator::kDb:
      return db_reinforce_loss(logits, log_emit, rng, opts, in_lens, out_lens, stats);
    case CbEstimator::kIdb:
      return idb_reinforce_loss(logits, log_emit, rng, opts, in_lens, out_lens, stats);
    case CbEstimator::kBb:
      return bb_reinforce_loss(logits, log_emit, rng, opts, in_lens, out_lens, stats);
    case CbEstimator::kStraightThroughIdb:
      return cb_straight_through_loss(logits, log_emit, rng, CbRelaxation::kIdb, opts, in_lens,
                                      out_lens, stats);
    case CbEstimator::kStraightThroughBb:
      return cb_straight_through_loss(logits, log_emit, rng, CbRelaxation::kBb, opts, in_lens,
                                      out_lens, stats);
    case CbEstimator::kExact: {
      at::Tensor loss = cb_marginal_loss(logits, log_emit, in_lens, out_lens);
      if (stats) *stats = CbEstimatorStats{};
      return loss;
    }
  }
  ::mona::detail::fail("mona::nn::cb_estimator_loss: bad estimator");
}

}  // namespace mona::nn
