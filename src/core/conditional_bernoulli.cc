// Conditional Bernoulli distribution, suffix tables and samplers (004 eqs. 3-13): see
// include/mona/core/conditional_bernoulli.h for the recursions and
// docs/math/conditional_bernoulli.md for the derivations.
#include "mona/core/conditional_bernoulli.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "cb_rows.h"
#include "mona/core/poisson_binomial.h"
#include "parallel.h"
#include "validate.h"

namespace mona::core {
namespace {

// Sizes, lengths, k and logits of a CB call (see the header for the Grid mapping).
template <class T>
void validate_cb(const char* kernel, const T* logits, const Grid& g) {
  mona::detail::check(g.batch >= 0, kernel, ": batch size must be >= 0, got ", g.batch);
  mona::detail::check(g.in_len >= 0, kernel, ": in_len T must be >= 0, got ", g.in_len);
  mona::detail::check(g.out_len >= 0, kernel, ": K (grid.out_len, the largest k) must be >= 0, got ",
                      g.out_len);
  for (int64_t b = 0; b < g.batch; ++b) {
    if (g.in_lens) {
      mona::detail::check(g.in_lens[b] >= 0 && g.in_lens[b] <= g.in_len, kernel, ": in_lens[", b,
                          "] must lie in [0, T=", g.in_len, "], got ", g.in_lens[b]);
    }
    const int64_t k = g.U_of(b), n = g.T_of(b);
    mona::detail::check(k >= 0, kernel, ": k[", b, "] must be >= 0, got ", k);
    mona::detail::check(k <= g.out_len, kernel, ": k[", b, "] must be <= K=", g.out_len,
                        " (grid.out_len), got ", k);
    mona::detail::check(k <= n, kernel, ": k[", b, "] must be <= in_lens[", b, "]=", n,
                        " (cannot have more highs than trials), got ", k);
  }
  if (g.batch * g.in_len > 0) detail::check_ptr(logits, kernel, "logits");
  detail::check_finite(kernel, "logits", logits, detail::rows_grid(g.batch, g.in_len, g.in_lens));
}

// b must hold 0/1 in the valid region and sum to k per row.
template <class T>
void validate_b(const char* kernel, const T* b, const Grid& g) {
  if (g.batch * g.in_len > 0) detail::check_ptr(b, kernel, "b");
  for (int64_t r = 0; r < g.batch; ++r) {
    const int64_t n = g.T_of(r);
    int64_t ones = 0;
    for (int64_t t = 0; t < n; ++t) {
      const T v = b[r * g.in_len + t];
      mona::detail::check(v == T(0) || v == T(1), kernel, ": b: expected values in {0, 1}, got ",
                          static_cast<double>(v), " at [", r, ", ", t, "]");
      ones += v == T(1);
    }
    mona::detail::check(ones == g.U_of(r), kernel, ": b: expected sum of row ", r, " == k[", r,
                        "]=", g.U_of(r), ", got ", ones);
  }
}

template <class T>
void validate_table_ptr(const char* kernel, const T* table, const Grid& g) {
  if (g.batch > 0) detail::check_ptr(table, kernel, "table");
}

template <class T>
void check_finite_vec(const char* kernel, const char* name, const T* x, int64_t batch,
                      int64_t len, const int64_t* lens) {
  if (batch * len > 0) detail::check_ptr(x, kernel, name);
  detail::check_finite(kernel, name, x, detail::rows_grid(batch, len, lens));
}

inline int64_t table_stride(const Grid& g) { return (g.in_len + 1) * (g.out_len + 1); }

// ---- row kernels: x = logits of one row (n valid), kk = k; `rows` serves the suffix table
// in double (detail::table_rows, detail::SuffixRows; see cb_rows.h) ----------------------------

// The suffix table of one row into Q (row stride W), computed in double and rounded once.
template <class T>
void build_table(const T* x, int64_t n, int64_t kk, T* Q, int64_t W) {
  std::vector<double> next = detail::suffix_first_row(kk), row(static_cast<size_t>(kk + 1));
  for (int64_t j = 0; j <= kk; ++j) Q[n * W + j] = static_cast<T>(next[static_cast<size_t>(j)]);
  for (int64_t t = n - 1; t >= 0; --t) {
    detail::suffix_step(x[t], next.data(), row.data(), kk);
    for (int64_t j = 0; j <= kk; ++j) Q[t * W + j] = static_cast<T>(row[static_cast<size_t>(j)]);
    std::swap(next, row);
  }
}

template <class T>
void zero(T* x, int64_t n) {
  std::fill(x, x + n, T(0));
}

// A row's values computed in double into out[0 .. len), rounded once; padding 0.
template <class T>
void store(const std::vector<double>& v, T* out, int64_t len) {
  for (size_t t = 0; t < v.size(); ++t) out[t] = static_cast<T>(v[t]);
  zero(out + v.size(), len - static_cast<int64_t>(v.size()));
}

// P(b_t = 1 | k) for t < n: the table adjoint with one seed 1 at (0, k).
template <class T>
std::vector<double> marginals_row(const T* x, int64_t n, int64_t kk, const T* table, int64_t W) {
  std::vector<double> m(static_cast<size_t>(n)), unused(static_cast<size_t>(n), 0.0);
  auto rows = detail::table_rows(table, W, x, n, kk);
  detail::table_adjoint(
      x, n, kk, rows, [&](int64_t t, int64_t j) { return (t == 0 && j == kk) ? 1.0 : 0.0; },
      unused.data(), m.data());
  return m;
}

// Positions of the highs of a 0/1 row, increasing.
template <class T>
std::vector<int64_t> highs_of(const T* b, int64_t n) {
  std::vector<int64_t> pos;
  for (int64_t t = 0; t < n; ++t) {
    if (b[t] == T(1)) pos.push_back(t);
  }
  return pos;
}

template <class T, class Rows>
void idb_steps_row(const T* x, const T* b, int64_t n, int64_t kk, Rows& rows, T* out) {
  int64_t j = kk;
  for (int64_t t = 0; t < n; ++t) {
    const double* row = rows.row(t);
    const double* nx = rows.row(t + 1);
    const double xt = static_cast<double>(x[t]);
    if (b[t] == T(1)) {
      out[t] = static_cast<T>(log_sigmoid(xt) + nx[j - 1] - row[j]);
      --j;
    } else {
      out[t] = static_cast<T>(log_sigmoid(-xt) + nx[j] - row[j]);
    }
  }
}

// Step r reads Q[t_{r-1} + 1, k - r], which step r - 1 read as its Q[t_{r-1} + 1, m - 1],
// so the rows are asked in increasing t.
template <class T, class Rows>
void bb_steps_row(const T* x, const std::vector<int64_t>& pos, int64_t kk, Rows& rows, T* out) {
  int64_t prev = -1;
  double base = rows.row(0)[kk];
  for (int64_t r = 0; r < kk; ++r) {
    const int64_t t = pos[static_cast<size_t>(r)], m = kk - r;
    double acc = 0;
    for (int64_t s = prev + 1; s < t; ++s) acc += log_sigmoid(-static_cast<double>(x[s]));
    const double q = rows.row(t + 1)[m - 1];
    out[r] = static_cast<T>(log_sigmoid(static_cast<double>(x[t])) + q + acc - base);
    base = q;
    prev = t;
  }
}

// The DB's permuted order: the drafts first, then the other trials increasing.
std::vector<int64_t> db_permutation(const int64_t* order, int64_t n, int64_t kk) {
  std::vector<char> drafted(static_cast<size_t>(n), 0);
  std::vector<int64_t> perm(order, order + kk);
  for (int64_t j = 0; j < kk; ++j) drafted[static_cast<size_t>(order[j])] = 1;
  for (int64_t t = 0; t < n; ++t) {
    if (!drafted[static_cast<size_t>(t)]) perm.push_back(t);
  }
  return perm;
}

// x in the order perm.
template <class T>
std::vector<T> permuted(const T* x, const std::vector<int64_t>& perm) {
  std::vector<T> xp(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) xp[i] = x[perm[i]];
  return xp;
}

// Step j reads Qp[j + 1, k - j - 1] and Qp[j, k - j], the latter read by step j - 1.
template <class T>
void db_steps_row(const std::vector<T>& xp, int64_t kk, detail::SuffixRows<T>& rows, T* out) {
  double base = rows.row(0)[kk];
  for (int64_t j = 0; j < kk; ++j) {
    const double q = rows.row(j + 1)[kk - j - 1];
    out[j] = static_cast<T>(log_sigmoid(static_cast<double>(xp[static_cast<size_t>(j)])) + q -
                            base - std::log(static_cast<double>(kk - j)));
    base = q;
  }
}

void validate_order(const char* kernel, const char* name, const int64_t* order, const Grid& g,
                    bool increasing) {
  if (g.batch * g.out_len > 0) detail::check_ptr(order, kernel, name);
  for (int64_t r = 0; r < g.batch; ++r) {
    const int64_t n = g.T_of(r), kk = g.U_of(r);
    std::vector<char> seen(static_cast<size_t>(n), 0);
    for (int64_t j = 0; j < kk; ++j) {
      const int64_t t = order[r * g.out_len + j];
      mona::detail::check(t >= 0 && t < n, kernel, ": ", name, ": expected entries in [0, in_lens[",
                          r, "]=", n, "), got ", t, " at [", r, ", ", j, "]");
      mona::detail::check(!seen[static_cast<size_t>(t)], kernel, ": ", name,
                          ": expected distinct entries, got ", t, " twice in row ", r);
      if (increasing && j > 0) {
        mona::detail::check(t > order[r * g.out_len + j - 1], kernel, ": ", name,
                            ": expected increasing entries, got ", t, " after ",
                            order[r * g.out_len + j - 1], " in row ", r);
      }
      seen[static_cast<size_t>(t)] = 1;
    }
  }
}

std::vector<uint64_t> row_seeds(Rng& rng, int64_t batch) {
  std::vector<uint64_t> s(static_cast<size_t>(batch));
  for (auto& v : s) v = rng.next();
  return s;
}

// IDB decisions for one row (004 eq. 10); writes b[0..n).
template <class T, class Rows>
void idb_draw_row(const T* x, int64_t n, int64_t kk, Rows& rows, Rng& r, T* b) {
  int64_t j = kk;
  for (int64_t t = 0; t < n; ++t) {
    const double u = r.uniform();
    bool high;
    if (j == 0) {
      high = false;
    } else if (j >= n - t) {
      high = true;
    } else {
      const double* row = rows.row(t);
      const double* nx = rows.row(t + 1);
      high = u < std::exp(log_sigmoid(static_cast<double>(x[t])) + nx[j - 1] - row[j]);
    }
    b[t] = high ? T(1) : T(0);
    j -= high;
  }
}

}  // namespace

template <class T>
void cb_table(const T* logits, T* table, const Grid& grid) {
  const char* kName = "cb_table";
  validate_cb(kName, logits, grid);
  if (grid.batch > 0) detail::check_ptr(table, kName, "table");
  const int64_t W = grid.out_len + 1, S = table_stride(grid);
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t b = 0; b < grid.batch; ++b) {
    const int64_t n = grid.T_of(b), kk = grid.U_of(b);
    T* Q = table + b * S;
    zero(Q, S);
    build_table(logits + b * grid.in_len, n, kk, Q, W);
  }
}

template <class T>
void cb_table_backward(const T* grad_table, const T* logits, const T* table, T* grad_logits,
                       const Grid& grid) {
  const char* kName = "cb_table_backward";
  validate_cb(kName, logits, grid);
  validate_table_ptr(kName, table, grid);
  if (grid.batch > 0) detail::check_ptr(grad_table, kName, "grad_table");
  if (grid.batch * grid.in_len > 0) detail::check_ptr(grad_logits, kName, "grad_logits");
  const int64_t W = grid.out_len + 1, S = table_stride(grid);
  for (int64_t b = 0; b < grid.batch; ++b) {  // validate the read entries
    const int64_t n = grid.T_of(b), kk = grid.U_of(b);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = 0; j <= kk; ++j) {
        const T v = grad_table[b * S + t * W + j];
        mona::detail::check(std::isfinite(v), kName, ": grad_table: expected finite values, got ",
                            static_cast<double>(v), " at [", b, ", ", t, ", ", j, "]");
      }
    }
  }
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t b = 0; b < grid.batch; ++b) {
    const int64_t n = grid.T_of(b), kk = grid.U_of(b);
    const T* x = logits + b * grid.in_len;
    const T* G = grad_table + b * S;
    auto rows = detail::table_rows(table + b * S, W, x, n, kk);
    std::vector<double> gx(static_cast<size_t>(n), 0.0);
    detail::table_adjoint(
        x, n, kk, rows, [&](int64_t t, int64_t j) { return G[t * W + j]; }, gx.data(),
        nullptr);
    store(gx, grad_logits + b * grid.in_len, grid.in_len);
  }
}

template <class T>
void cb_log_prob(const T* logits, const T* b, const T* table, T* log_prob, const Grid& grid) {
  const char* kName = "cb_log_prob";
  validate_cb(kName, logits, grid);
  validate_b(kName, b, grid);
  validate_table_ptr(kName, table, grid);
  if (grid.batch > 0) detail::check_ptr(log_prob, kName, "log_prob");
  const int64_t W = grid.out_len + 1, S = table_stride(grid);
#pragma omp parallel for schedule(static) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t r = 0; r < grid.batch; ++r) {
    const int64_t n = grid.T_of(r), kk = grid.U_of(r);
    const T* x = logits + r * grid.in_len;
    const T* br = b + r * grid.in_len;
    double s = 0;
    for (int64_t t = 0; t < n; ++t) {
      const double xt = static_cast<double>(x[t]);
      s += log_sigmoid(br[t] == T(1) ? xt : -xt);
    }
    auto rows = detail::table_rows(table + r * S, W, x, n, kk);
    log_prob[r] = static_cast<T>(s - rows.row(0)[kk]);
  }
}

template <class T>
void cb_log_prob_backward(const T* grad_log_prob, const T* logits, const T* b, const T* table,
                          T* grad_logits, const Grid& grid) {
  const char* kName = "cb_log_prob_backward";
  validate_cb(kName, logits, grid);
  validate_b(kName, b, grid);
  validate_table_ptr(kName, table, grid);
  if (grid.batch > 0) detail::check_ptr(grad_log_prob, kName, "grad_log_prob");
  detail::check_finite(kName, "grad_log_prob", grad_log_prob, detail::vector_grid(grid.batch));
  if (grid.batch * grid.in_len > 0) detail::check_ptr(grad_logits, kName, "grad_logits");
  const int64_t W = grid.out_len + 1, S = table_stride(grid);
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t r = 0; r < grid.batch; ++r) {
    const int64_t n = grid.T_of(r), kk = grid.U_of(r);
    const T* x = logits + r * grid.in_len;
    const double g = static_cast<double>(grad_log_prob[r]);
    T* gx = grad_logits + r * grid.in_len;
    const std::vector<double> m = marginals_row(x, n, kk, table + r * S, W);
    const T* br = b + r * grid.in_len;
    for (int64_t t = 0; t < n; ++t) {
      gx[t] = static_cast<T>(g * (static_cast<double>(br[t]) - m[static_cast<size_t>(t)]));
    }
    zero(gx + n, grid.in_len - n);
  }
}

template <class T>
void cb_marginals(const T* logits, const T* table, T* marginals, const Grid& grid) {
  const char* kName = "cb_marginals";
  validate_cb(kName, logits, grid);
  validate_table_ptr(kName, table, grid);
  if (grid.batch * grid.in_len > 0) detail::check_ptr(marginals, kName, "marginals");
  const int64_t W = grid.out_len + 1, S = table_stride(grid);
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t r = 0; r < grid.batch; ++r) {
    const int64_t n = grid.T_of(r), kk = grid.U_of(r);
    std::vector<double> m = marginals_row(logits + r * grid.in_len, n, kk, table + r * S, W);
    for (double& v : m) v = std::min(v, 1.0);
    store(m, marginals + r * grid.in_len, grid.in_len);
  }
}

template <class T>
void cb_idb_step_log_probs(const T* logits, const T* b, const T* table, T* step_log_probs,
                           const Grid& grid) {
  const char* kName = "cb_idb_step_log_probs";
  validate_cb(kName, logits, grid);
  validate_b(kName, b, grid);
  validate_table_ptr(kName, table, grid);
  if (grid.batch * grid.in_len > 0) detail::check_ptr(step_log_probs, kName, "step_log_probs");
  const int64_t W = grid.out_len + 1, S = table_stride(grid);
#pragma omp parallel for schedule(static) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t r = 0; r < grid.batch; ++r) {
    const int64_t n = grid.T_of(r), kk = grid.U_of(r), off = r * grid.in_len;
    auto rows = detail::table_rows(table + r * S, W, logits + off, n, kk);
    idb_steps_row(logits + off, b + off, n, kk, rows, step_log_probs + off);
    zero(step_log_probs + off + n, grid.in_len - n);
  }
}

template <class T>
void cb_idb_step_log_probs_backward(const T* grad_step, const T* logits, const T* b,
                                    const T* table, T* grad_logits, const Grid& grid) {
  const char* kName = "cb_idb_step_log_probs_backward";
  validate_cb(kName, logits, grid);
  validate_b(kName, b, grid);
  validate_table_ptr(kName, table, grid);
  check_finite_vec(kName, "grad_step", grad_step, grid.batch, grid.in_len, grid.in_lens);
  if (grid.batch * grid.in_len > 0) detail::check_ptr(grad_logits, kName, "grad_logits");
  const int64_t W = grid.out_len + 1, S = table_stride(grid);
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t r = 0; r < grid.batch; ++r) {
    const int64_t n = grid.T_of(r), kk = grid.U_of(r), off = r * grid.in_len;
    const T* x = logits + off;
    const T* br = b + off;
    const T* g = grad_step + off;
    // step t reads Q[t, j_t] (coefficient -g_t) and Q[t+1, j_{t+1}] (+g_t); j_t = highs left.
    std::vector<int64_t> jt(static_cast<size_t>(n + 1));
    jt[0] = kk;
    for (int64_t t = 0; t < n; ++t) jt[static_cast<size_t>(t + 1)] = jt[static_cast<size_t>(t)] - (br[t] == T(1));
    std::vector<double> gx(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) {
      gx[static_cast<size_t>(t)] = static_cast<double>(g[t]) *
          (static_cast<double>(br[t]) - std::exp(log_sigmoid(static_cast<double>(x[t]))));
    }
    auto rows = detail::table_rows(table + r * S, W, x, n, kk);
    detail::table_adjoint(
        x, n, kk, rows,
        [&](int64_t t, int64_t j) {
          if (j != jt[static_cast<size_t>(t)]) return 0.0;
          return (t > 0 ? static_cast<double>(g[t - 1]) : 0.0) - static_cast<double>(g[t]);
        },
        gx.data(), nullptr);
    store(gx, grad_logits + off, grid.in_len);
  }
}

template <class T>
void cb_bb_step_log_probs(const T* logits, const T* b, const T* table, T* step_log_probs,
                          const Grid& grid) {
  const char* kName = "cb_bb_step_log_probs";
  validate_cb(kName, logits, grid);
  validate_b(kName, b, grid);
  validate_table_ptr(kName, table, grid);
  if (grid.batch * grid.out_len > 0) detail::check_ptr(step_log_probs, kName, "step_log_probs");
  const int64_t W = grid.out_len + 1, S = table_stride(grid), K = grid.out_len;
#pragma omp parallel for schedule(static) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t r = 0; r < grid.batch; ++r) {
    const int64_t n = grid.T_of(r), kk = grid.U_of(r);
    const T* x = logits + r * grid.in_len;
    const auto pos = highs_of(b + r * grid.in_len, n);
    auto rows = detail::table_rows(table + r * S, W, x, n, kk);
    bb_steps_row(x, pos, kk, rows, step_log_probs + r * K);
    zero(step_log_probs + r * K + kk, K - kk);
  }
}

template <class T>
void cb_bb_step_log_probs_backward(const T* grad_step, const T* logits, const T* b,
                                   const T* table, T* grad_logits, const Grid& grid) {
  const char* kName = "cb_bb_step_log_probs_backward";
  validate_cb(kName, logits, grid);
  validate_b(kName, b, grid);
  validate_table_ptr(kName, table, grid);
  std::vector<int64_t> klens(static_cast<size_t>(grid.batch));
  for (int64_t r = 0; r < grid.batch; ++r) klens[static_cast<size_t>(r)] = grid.U_of(r);
  check_finite_vec(kName, "grad_step", grad_step, grid.batch, grid.out_len, klens.data());
  if (grid.batch * grid.in_len > 0) detail::check_ptr(grad_logits, kName, "grad_logits");
  const int64_t W = grid.out_len + 1, S = table_stride(grid), K = grid.out_len;
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t r = 0; r < grid.batch; ++r) {
    const int64_t n = grid.T_of(r), kk = grid.U_of(r), off = r * grid.in_len;
    const T* x = logits + off;
    const T* g = grad_step + r * K;
    const auto pos = highs_of(b + off, n);
    // Seeds: +g_r at (t_r + 1, k - r - 1), -g_r at (t_{r-1} + 1, k - r) (0-based r). Both
    // land on rows t_r + 1 (t_{-1} = -1), one column each, so a row holds at most one seed:
    // column scol[t] (-1: none), weight sval[t].
    std::vector<int64_t> scol(static_cast<size_t>(n + 1), -1);
    std::vector<double> sval(static_cast<size_t>(n + 1), 0.0), gx(static_cast<size_t>(n), 0.0);
    scol[0] = kk;
    int64_t prev = -1;
    for (int64_t rr = 0; rr < kk; ++rr) {
      const int64_t t = pos[static_cast<size_t>(rr)], m = kk - rr;
      const double gr = static_cast<double>(g[rr]);
      scol[static_cast<size_t>(t + 1)] = m - 1;
      sval[static_cast<size_t>(t + 1)] += gr;
      sval[static_cast<size_t>(prev + 1)] -= gr;
      gx[static_cast<size_t>(t)] += gr * (1.0 - std::exp(log_sigmoid(static_cast<double>(x[t]))));
      for (int64_t s = prev + 1; s < t; ++s) {
        gx[static_cast<size_t>(s)] -= gr * std::exp(log_sigmoid(static_cast<double>(x[s])));
      }
      prev = t;
    }
    auto rows = detail::table_rows(table + r * S, W, x, n, kk);
    detail::table_adjoint(
        x, n, kk, rows,
        [&](int64_t t, int64_t j) {
          return j == scol[static_cast<size_t>(t)] ? sval[static_cast<size_t>(t)] : 0.0;
        },
        gx.data(), nullptr);
    store(gx, grad_logits + off, grid.in_len);
  }
}

template <class T>
void cb_db_step_log_probs(const T* logits, const int64_t* order, T* step_log_probs,
                          const Grid& grid) {
  const char* kName = "cb_db_step_log_probs";
  validate_cb(kName, logits, grid);
  validate_order(kName, "order", order, grid, false);
  if (grid.batch * grid.out_len > 0) detail::check_ptr(step_log_probs, kName, "step_log_probs");
  const int64_t K = grid.out_len;
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t r = 0; r < grid.batch; ++r) {
    const int64_t n = grid.T_of(r), kk = grid.U_of(r);
    const auto perm = db_permutation(order + r * K, n, kk);
    const std::vector<T> xp = permuted(logits + r * grid.in_len, perm);
    detail::SuffixRows<T> rows(xp.data(), n, kk);
    db_steps_row(xp, kk, rows, step_log_probs + r * K);
    zero(step_log_probs + r * K + kk, K - kk);
  }
}

template <class T>
void cb_db_step_log_probs_backward(const T* grad_step, const T* logits, const int64_t* order,
                                   T* grad_logits, const Grid& grid) {
  const char* kName = "cb_db_step_log_probs_backward";
  validate_cb(kName, logits, grid);
  validate_order(kName, "order", order, grid, false);
  std::vector<int64_t> klens(static_cast<size_t>(grid.batch));
  for (int64_t r = 0; r < grid.batch; ++r) klens[static_cast<size_t>(r)] = grid.U_of(r);
  check_finite_vec(kName, "grad_step", grad_step, grid.batch, grid.out_len, klens.data());
  if (grid.batch * grid.in_len > 0) detail::check_ptr(grad_logits, kName, "grad_logits");
  const int64_t K = grid.out_len;
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t r = 0; r < grid.batch; ++r) {
    const int64_t n = grid.T_of(r), kk = grid.U_of(r);
    const T* g = grad_step + r * K;
    const auto perm = db_permutation(order + r * K, n, kk);
    const std::vector<T> xp = permuted(logits + r * grid.in_len, perm);
    detail::SuffixRows<T> rows(xp.data(), n, kk);
    std::vector<double> gxp(static_cast<size_t>(n), 0.0);
    for (int64_t j = 0; j < kk; ++j) {
      gxp[static_cast<size_t>(j)] += static_cast<double>(g[j]) *
          (1.0 - std::exp(log_sigmoid(static_cast<double>(xp[static_cast<size_t>(j)]))));
    }
    // step j reads Qp[j+1, k-j-1] (+g_j) and Qp[j, k-j] (-g_j): seeds lie on the diagonal
    // t + j' = k, so seed(t, k - t) = g_{t-1} - g_t.
    detail::table_adjoint(
        xp.data(), n, kk, rows,
        [&](int64_t t, int64_t j) {
          if (t > kk || j != kk - t) return 0.0;
          return (t > 0 ? static_cast<double>(g[t - 1]) : 0.0) -
                 (t < kk ? static_cast<double>(g[t]) : 0.0);
        },
        gxp.data(), nullptr);
    T* gx = grad_logits + r * grid.in_len;
    zero(gx, grid.in_len);
    for (int64_t i = 0; i < n; ++i) {
      gx[perm[static_cast<size_t>(i)]] = static_cast<T>(gxp[static_cast<size_t>(i)]);
    }
  }
}

template <class T>
void cb_sample_idb(const T* logits, const T* table, Rng& rng, T* b, T* step_log_probs,
                   const Grid& grid) {
  const char* kName = "cb_sample_idb";
  validate_cb(kName, logits, grid);
  validate_table_ptr(kName, table, grid);
  if (grid.batch * grid.in_len > 0) detail::check_ptr(b, kName, "b");
  const int64_t W = grid.out_len + 1, S = table_stride(grid);
  const auto seeds = row_seeds(rng, grid.batch);
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t r = 0; r < grid.batch; ++r) {
    const int64_t n = grid.T_of(r), kk = grid.U_of(r), off = r * grid.in_len;
    Rng gen(seeds[static_cast<size_t>(r)]);
    auto rows = detail::table_rows(table + r * S, W, logits + off, n, kk);
    idb_draw_row(logits + off, n, kk, rows, gen, b + off);
    zero(b + off + n, grid.in_len - n);
    if (step_log_probs) {
      idb_steps_row(logits + off, b + off, n, kk, rows, step_log_probs + off);
      zero(step_log_probs + off + n, grid.in_len - n);
    }
  }
}

template <class T>
void cb_sample_bb(const T* logits, const T* table, Rng& rng, T* b, int64_t* positions,
                  T* step_log_probs, const Grid& grid) {
  const char* kName = "cb_sample_bb";
  validate_cb(kName, logits, grid);
  validate_table_ptr(kName, table, grid);
  if (grid.batch * grid.in_len > 0) detail::check_ptr(b, kName, "b");
  const int64_t W = grid.out_len + 1, S = table_stride(grid), K = grid.out_len;
  const auto seeds = row_seeds(rng, grid.batch);
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t r = 0; r < grid.batch; ++r) {
    const int64_t n = grid.T_of(r), kk = grid.U_of(r), off = r * grid.in_len;
    const T* x = logits + off;
    auto rows = detail::table_rows(table + r * S, W, x, n, kk);
    Rng gen(seeds[static_cast<size_t>(r)]);
    T* br = b + off;
    zero(br, grid.in_len);
    std::vector<int64_t> pos(static_cast<size_t>(kk));
    int64_t prev = -1;
    for (int64_t rr = 0; rr < kk; ++rr) {
      const int64_t m = kk - rr, s0 = prev + 1, last = n - m;
      const double u = gen.uniform();
      const double base = rows.row(s0)[m];
      double cum = 0, acc = 0;
      int64_t chosen = last;
      for (int64_t t = s0; t <= last; ++t) {  // inverse CDF of 004 eq. 12
        const double xt = static_cast<double>(x[t]);
        cum += std::exp(log_sigmoid(xt) + rows.row(t + 1)[m - 1] + acc - base);
        if (u < cum) {
          chosen = t;
          break;
        }
        acc += log_sigmoid(-xt);
      }
      pos[static_cast<size_t>(rr)] = chosen;
      br[chosen] = T(1);
      prev = chosen;
    }
    if (positions) {
      std::copy(pos.begin(), pos.end(), positions + r * K);
      std::fill(positions + r * K + kk, positions + (r + 1) * K, int64_t(0));
    }
    if (step_log_probs) {
      bb_steps_row(x, pos, kk, rows, step_log_probs + r * K);
      zero(step_log_probs + r * K + kk, K - kk);
    }
  }
}

template <class T>
void cb_sample_db(const T* logits, const T* table, Rng& rng, T* b, int64_t* order,
                  T* step_log_probs, const Grid& grid) {
  const char* kName = "cb_sample_db";
  validate_cb(kName, logits, grid);
  validate_table_ptr(kName, table, grid);
  if (grid.batch * grid.in_len > 0) detail::check_ptr(b, kName, "b");
  const int64_t W = grid.out_len + 1, S = table_stride(grid), K = grid.out_len;
  const auto seeds = row_seeds(rng, grid.batch);
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t r = 0; r < grid.batch; ++r) {
    const int64_t n = grid.T_of(r), kk = grid.U_of(r), off = r * grid.in_len;
    const T* x = logits + off;
    Rng gen(seeds[static_cast<size_t>(r)]);
    {
      auto rows = detail::table_rows(table + r * S, W, x, n, kk);
      idb_draw_row(x, n, kk, rows, gen, b + off);
    }
    zero(b + off + n, grid.in_len - n);
    auto ord = highs_of(b + off, n);
    // Uniform order of the drawn set (004 eq. 9): Fisher-Yates.
    for (int64_t i = kk - 1; i > 0; --i) {
      const int64_t j = std::min<int64_t>(static_cast<int64_t>(gen.uniform() * double(i + 1)), i);
      std::swap(ord[static_cast<size_t>(i)], ord[static_cast<size_t>(j)]);
    }
    if (order) {
      std::copy(ord.begin(), ord.end(), order + r * K);
      std::fill(order + r * K + kk, order + (r + 1) * K, int64_t(0));
    }
    if (step_log_probs) {
      const std::vector<T> xp = permuted(x, db_permutation(ord.data(), n, kk));
      detail::SuffixRows<T> rows(xp.data(), n, kk);
      db_steps_row(xp, kk, rows, step_log_probs + r * K);
      zero(step_log_probs + r * K + kk, K - kk);
    }
  }
}

#define MONA_INSTANTIATE(T)                                                                   \
  template void cb_table<T>(const T*, T*, const Grid&);                                       \
  template void cb_table_backward<T>(const T*, const T*, const T*, T*, const Grid&);          \
  template void cb_log_prob<T>(const T*, const T*, const T*, T*, const Grid&);                \
  template void cb_log_prob_backward<T>(const T*, const T*, const T*, const T*, T*,           \
                                        const Grid&);                                         \
  template void cb_marginals<T>(const T*, const T*, T*, const Grid&);                         \
  template void cb_idb_step_log_probs<T>(const T*, const T*, const T*, T*, const Grid&);      \
  template void cb_idb_step_log_probs_backward<T>(const T*, const T*, const T*, const T*, T*, \
                                                  const Grid&);                               \
  template void cb_bb_step_log_probs<T>(const T*, const T*, const T*, T*, const Grid&);       \
  template void cb_bb_step_log_probs_backward<T>(const T*, const T*, const T*, const T*, T*,  \
                                                 const Grid&);                                \
  template void cb_db_step_log_probs<T>(const T*, const int64_t*, T*, const Grid&);           \
  template void cb_db_step_log_probs_backward<T>(const T*, const T*, const int64_t*, T*,      \
                                                 const Grid&);                                \
  template void cb_sample_idb<T>(const T*, const T*, Rng&, T*, T*, const Grid&);              \
  template void cb_sample_bb<T>(const T*, const T*, Rng&, T*, int64_t*, T*, const Grid&);     \
  template void cb_sample_db<T>(const T*, const T*, Rng&, T*, int64_t*, T*, const Grid&);
MONA_INSTANTIATE(float)
MONA_INSTANTIATE(double)
#undef MONA_INSTANTIATE

}  // namespace mona::core
