// Internal: the rows of the log-space tables of the conditional Bernoulli family
// (mona/core/poisson_binomial.h, conditional_bernoulli.h, cb_marginal.h) in double, kept whole
// or recomputed from checkpoints, and the adjoint of the suffix table.
//
// Why double for both dtypes: an entry Q[t, j] = log P(K_{S_t} = j) has a magnitude of up to
// about sum_{s >= t} |x_s| (3e4 for T = 20,000 logits N(0, 3) and k = 100; 3e5 with logits of
// +-30), so in float it carries an absolute rounding error of |Q| 2^-24 (2e-3 and 2e-2 there).
// The kernels read the table only through differences of neighbouring entries,
// exp(Q[t+1, .] - Q[t, .]), which that error turns into a relative error of every split
// weight; over T steps of the adjoint the marginals stop summing to k and gradients leave
// [-1, 1]. In double the same error is 2^-53 |Q|, 2^29 times smaller (a few 1e-11 at
// |Q| = 3e5). The float kernels therefore run every recursion in double and round their
// outputs once.
//
// Memory: a [T + 1, k + 1] table in double takes 8 (T + 1)(k + 1) bytes (800 MB at
// T = 100,000, k = 1,000). CheckpointedRows keeps the table whole up to kWholeTableEntries
// entries (32 MiB); above that it keeps every C-th row, C = ceil(sqrt(T)), and recomputes the
// rows of a block of C - 1 from the checkpoint below it when one is asked for: about
// 2 sqrt(T) (k + 1) doubles (5 MB at T = 100,000, k = 1,000) for one more pass of the
// recursion. A recomputed row is the same arithmetic as the first pass, so results are
// bit-identical whichever way the rows are kept.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "mona/core/poisson_binomial.h"

namespace mona::core::detail {

/// Tables up to this many entries are kept whole; larger ones are checkpointed.
constexpr int64_t kWholeTableEntries = int64_t(1) << 22;

/// Rows 0 .. n of a recursion row[r] = step(r, row[r - 1]) from a given row 0, each `width`
/// doubles. row(r) may be asked in any order; asking in monotone order recomputes each
/// block at most once. A pointer from row(r) stays valid until a row of another block is
/// asked for; rows r and r - 1 (or r + 1) may be held together.
template <class Step>
class CheckpointedRows {
 public:
  /// step(r, prev, cur) writes row r into cur from row r - 1 in prev.
  CheckpointedRows(int64_t n, int64_t width, const std::vector<double>& first, Step step)
      : n_(n), width_(width), stride_(stride_for(n, width)), step_(step) {
    const size_t w = static_cast<size_t>(width);
    kept_.resize(static_cast<size_t>(n / stride_ + 1) * w);
    buf_.resize(static_cast<size_t>(stride_ - 1) * w);
    std::vector<double> prev = first, cur(w);
    std::copy(prev.begin(), prev.end(), kept_.begin());
    for (int64_t r = 1; r <= n; ++r) {
      step_(r, prev.data(), cur.data());
      if (r % stride_ == 0) std::copy(cur.begin(), cur.end(), kept_.data() + (r / stride_) * width);
      std::swap(prev, cur);
    }
    last_ = std::move(prev);
  }

  const double* row(int64_t r) {
    if (r == n_) return last_.data();
    if (r % stride_ == 0) return kept_.data() + (r / stride_) * width_;
    const int64_t block = r / stride_;
    if (block != block_) load(block);
    return buf_.data() + (r - block * stride_ - 1) * width_;
  }

 private:
  static int64_t stride_for(int64_t n, int64_t width) {
    if ((n + 1) * width <= kWholeTableEntries) return 1;
    return static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(n))));
  }

  // Rows block * stride + 1 .. min(block * stride + stride, n) - 1 into buf_.
  void load(int64_t block) {
    const int64_t r0 = block * stride_, r1 = std::min(r0 + stride_, n_);
    const double* prev = kept_.data() + block * width_;
    for (int64_t r = r0 + 1; r < r1; ++r) {
      double* cur = buf_.data() + (r - r0 - 1) * width_;
      step_(r, prev, cur);
      prev = cur;
    }
    block_ = block;
  }

  int64_t n_, width_, stride_;
  Step step_;
  std::vector<double> kept_, buf_, last_;  // rows r % stride == 0; one block; row n
  int64_t block_ = -1;
};

/// Row t of the suffix table from row t + 1 (mona/core/conditional_bernoulli.h):
/// Q[t, 0] = lq_t + Q[t+1, 0], Q[t, j] = logaddexp(lq_t + Q[t+1, j], lp_t + Q[t+1, j-1]).
template <class T>
inline void suffix_step(T x_t, const double* next, double* row, int64_t kk) {
  const double x = static_cast<double>(x_t);
  const double lp = log_sigmoid(x), lq = log_sigmoid(-x);
  row[0] = lq + next[0];
  for (int64_t j = 1; j <= kk; ++j) row[j] = log_add_exp(lq + next[j], lp + next[j - 1]);
}

/// Q[n, :] = (0, -inf, ..., -inf): k + 1 entries.
inline std::vector<double> suffix_first_row(int64_t kk) {
  std::vector<double> q(static_cast<size_t>(kk + 1), -std::numeric_limits<double>::infinity());
  q[0] = 0;
  return q;
}

template <class T>
struct SuffixStep {
  const T* x;
  int64_t n, kk;
  void operator()(int64_t r, const double* next, double* row) const {
    suffix_step(x[n - r], next, row, kk);
  }
};

/// The suffix table Q [n + 1, k + 1] of one row of logits, in double; row(t) as above, built
/// from t = n down, so asking rows in increasing t recomputes each block once.
template <class T>
class SuffixRows {
 public:
  SuffixRows(const T* x, int64_t n, int64_t kk)
      : n_(n), rows_(n, kk + 1, suffix_first_row(kk), SuffixStep<T>{x, n, kk}) {}
  const double* row(int64_t t) { return rows_.row(n_ - t); }

 private:
  int64_t n_;
  CheckpointedRows<SuffixStep<T>> rows_;
};

/// A whole double table the caller built (rows of stride W).
struct TableView {
  const double* Q;
  int64_t W;
  const double* row(int64_t t) const { return Q + t * W; }
};

/// The rows a kernel reads from the caller's table: the table itself for double; for float,
/// whose entries are too coarse (header comment), the table recomputed in double.
inline TableView table_rows(const double* table, int64_t W, const double*, int64_t, int64_t) {
  return {table, W};
}
inline SuffixRows<float> table_rows(const float*, int64_t, const float* x, int64_t n,
                                    int64_t kk) {
  return SuffixRows<float>(x, n, kk);
}

/// The reverse scan of the suffix table (mona/core/conditional_bernoulli.h). seed(t, j) is
/// dL/dQ[t, j] (read only where Q is finite, t < n). Adds dL/dx_t to gx[t]; if take != null,
/// take[t] = sum_j G[t, j] c (with a single seed 1 at (0, k) this is P(b_t = 1 | k)).
template <class T, class Rows, class Seed>
void table_adjoint(const T* x, int64_t n, int64_t kk, Rows& rows, Seed seed, double* gx,
                   double* take) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  std::vector<double> G(static_cast<size_t>(kk + 1), 0.0), Gn(static_cast<size_t>(kk + 1));
  for (int64_t t = 0; t < n; ++t) {
    const double* row = rows.row(t);
    const double* nx = rows.row(t + 1);
    for (int64_t j = 0; j <= kk; ++j) {
      if (row[j] != kNegInf) G[static_cast<size_t>(j)] += static_cast<double>(seed(t, j));
    }
    const double xt = static_cast<double>(x[t]);
    const double lp = log_sigmoid(xt), lq = log_sigmoid(-xt);
    const double p = std::exp(lp);
    std::fill(Gn.begin(), Gn.end(), 0.0);
    double g = 0, tk = 0;
    for (int64_t j = 0; j <= kk; ++j) {
      const double Gj = G[static_cast<size_t>(j)];
      if (Gj == 0.0 || row[j] == kNegInf) continue;
      const double a = std::exp(lq + nx[j] - row[j]);
      const double c = j > 0 ? std::exp(lp + nx[j - 1] - row[j]) : 0.0;
      Gn[static_cast<size_t>(j)] += Gj * a;
      if (j > 0) Gn[static_cast<size_t>(j - 1)] += Gj * c;
      g += Gj * (c - p);
      tk += Gj * c;
    }
    gx[t] += g;
    if (take) take[t] = tk;
    std::swap(G, Gn);
  }
}

}  // namespace mona::core::detail
