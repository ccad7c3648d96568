// Conditional Bernoulli distribution, suffix tables and samplers (004 eqs. 3-13): see
// include/mona/core/conditional_bernoulli.h for the recursions and
// docs/math/conditional_bernoulli.md for the derivations.
#include "mona/core/conditional_bernoulli.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "mona/core/poisson_binomial.h"
#include "parallel.h"
#include "validate.h"

namespace mona::core {
namespace {

template <class T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();

void check_ptr(const void* ptr, const char* kernel, const char* name) {
  mona::detail::check(ptr != nullptr, kernel, ": ", name, " must not be null");
}

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
  if (g.batch * g.in_len > 0) check_ptr(logits, kernel, "logits");
  detail::check_finite(kernel, "logits", logits, detail::rows_grid(g.batch, g.in_len, g.in_lens));
}

// b must hold 0/1 in the valid region and sum to k per row.
template <class T>
void validate_b(const char* kernel, const T* b, const Grid& g) {
  if (g.batch * g.in_len > 0) check_ptr(b, kernel, "b");
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
  if (g.batch > 0) check_ptr(table, kernel, "table");
}

template <class T>
void check_finite_vec(const char* kernel, const char* name, const T* x, int64_t batch,
                      int64_t len, const int64_t* lens) {
  if (batch * len > 0) check_ptr(x, kernel, name);
  detail::check_finite(kernel, name, x, detail::rows_grid(batch, len, lens));
}

inline int64_t table_stride(const Grid& g) { return (g.in_len + 1) * (g.out_len + 1); }

// ---- row kernels: x = logits of one row (n valid), kk = k, Q with row stride W -------------

template <class T>
void build_table(const T* x, int64_t n, int64_t kk, T* Q, int64_t W) {
  T* last = Q + n * W;
  last[0] = T(0);
  for (int64_t j = 1; j <= kk; ++j) last[j] = kNegInf<T>;
  for (int64_t t = n - 1; t >= 0; --t) {
    const T lp = log_sigmoid(x[t]), lq = log_sigmoid(-x[t]);
    const T* nx = Q + (t + 1) * W;
    T* row = Q + t * W;
    row[0] = lq + nx[0];
    for (int64_t j = 1; j <= kk; ++j) row[j] = log_add_exp(lq + nx[j], lp + nx[j - 1]);
  }
}

// Reverse scan of build_table (header comment). seed(t, j) is dL/dQ[t, j] (read only where
// Q is finite, t < n). Adds dL/dx_t to gx[t]; if take != null, take[t] = sum_j G[t, j] c
// (with a single seed 1 at (0, k) this is the marginal P(b_t = 1 | k)).
template <class T, class Seed>
void table_adjoint(const T* x, int64_t n, int64_t kk, const T* Q, int64_t W, Seed seed, T* gx,
                   T* take) {
  std::vector<T> G(static_cast<size_t>(kk + 1), T(0)), Gn(static_cast<size_t>(kk + 1));
  for (int64_t t = 0; t < n; ++t) {
    const T* row = Q + t * W;
    const T* nx = Q + (t + 1) * W;
    for (int64_t j = 0; j <= kk; ++j) {
      if (row[j] != kNegInf<T>) G[j] += seed(t, j);
    }
    const T lp = log_sigmoid(x[t]), lq = log_sigmoid(-x[t]);
    const T p = std::exp(lp);
    std::fill(Gn.begin(), Gn.end(), T(0));
    T g = 0, tk = 0;
    for (int64_t j = 0; j <= kk; ++j) {
      const T Gj = G[j];
      if (Gj == T(0) || row[j] == kNegInf<T>) continue;
      const T a = std::exp(lq + nx[j] - row[j]);
      const T c = j > 0 ? std::exp(lp + nx[j - 1] - row[j]) : T(0);
      Gn[j] += Gj * a;
      if (j > 0) Gn[j - 1] += Gj * c;
      g += Gj * (c - p);
      tk += Gj * c;
    }
    gx[t] += g;
    if (take) take[t] = tk;
    std::swap(G, Gn);
  }
}

template <class T>
void zero(T* x, int64_t n) {
  std::fill(x, x + n, T(0));
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

template <class T>
void idb_steps_row(const T* x, const T* b, int64_t n, int64_t kk, const T* Q, int64_t W,
                   T* out) {
  int64_t j = kk;
  for (int64_t t = 0; t < n; ++t) {
    const T* row = Q + t * W;
    const T* nx = Q + (t + 1) * W;
    if (b[t] == T(1)) {
      out[t] = log_sigmoid(x[t]) + nx[j - 1] - row[j];
      --j;
    } else {
      out[t] = log_sigmoid(-x[t]) + nx[j] - row[j];
    }
  }
}

template <class T>
void bb_steps_row(const T* x, const std::vector<int64_t>& pos, int64_t kk, const T* Q,
                  int64_t W, T* out) {
  int64_t prev = -1;
  for (int64_t r = 0; r < kk; ++r) {
    const int64_t t = pos[static_cast<size_t>(r)], m = kk - r;
    T acc = 0;
    for (int64_t s = prev + 1; s < t; ++s) acc += log_sigmoid(-x[s]);
    out[r] = log_sigmoid(x[t]) + Q[(t + 1) * W + m - 1] + acc - Q[(prev + 1) * W + m];
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

template <class T>
void db_steps_row(const std::vector<T>& xp, int64_t kk, const T* Qp, int64_t W, T* out) {
  for (int64_t j = 0; j < kk; ++j) {
    out[j] = log_sigmoid(xp[static_cast<size_t>(j)]) + Qp[(j + 1) * W + kk - j - 1] -
             Qp[j * W + kk - j] - static_cast<T>(std::log(static_cast<double>(kk - j)));
  }
}

void validate_order(const char* kernel, const char* name, const int64_t* order, const Grid& g,
                    bool increasing) {
  if (g.batch * g.out_len > 0) check_ptr(order, kernel, name);
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
template <class T>
void idb_draw_row(const T* x, int64_t n, int64_t kk, const T* Q, int64_t W, Rng& r, T* b) {
  int64_t j = kk;
  for (int64_t t = 0; t < n; ++t) {
    const double u = r.uniform();
    bool high;
    if (j == 0) {
      high = false;
    } else if (j >= n - t) {
      high = true;
    } else {
      const T prob = std::exp(log_sigmoid(x[t]) + Q[(t + 1) * W + j - 1] - Q[t * W + j]);
      high = u < static_cast<double>(prob);
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
  if (grid.batch > 0) check_ptr(table, kName, "table");
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
  if (grid.batch > 0) check_ptr(grad_table, kName, "grad_table");
  if (grid.batch * grid.in_len > 0) check_ptr(grad_logits, kName, "grad_logits");
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
    T* gx = grad_logits + b * grid.in_len;
    zero(gx, grid.in_len);
    const T* G = grad_table + b * S;
    table_adjoint(
        logits + b * grid.in_len, n, kk, table + b * S, W,
        [&](int64_t t, int64_t j) { return G[t * W + j]; }, gx, static_cast<T*>(nullptr));
  }
}

template <class T>
void cb_log_prob(const T* logits, const T* b, const T* table, T* log_prob, const Grid& grid) {
  const char* kName = "cb_log_prob";
  validate_cb(kName, logits, grid);
  validate_b(kName, b, grid);
  validate_table_ptr(kName, table, grid);
  if (grid.batch > 0) check_ptr(log_prob, kName, "log_prob");
  const int64_t S = table_stride(grid);
#pragma omp parallel for schedule(static) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t r = 0; r < grid.batch; ++r) {
    const int64_t n = grid.T_of(r);
    const T* x = logits + r * grid.in_len;
    const T* br = b + r * grid.in_len;
    T s = 0;
    for (int64_t t = 0; t < n; ++t) s += log_sigmoid(br[t] == T(1) ? x[t] : -x[t]);
    log_prob[r] = s - table[r * S + grid.U_of(r)];
  }
}

template <class T>
void cb_log_prob_backward(const T* grad_log_prob, const T* logits, const T* b, const T* table,
                          T* grad_logits, const Grid& grid) {
  const char* kName = "cb_log_prob_backward";
  validate_cb(kName, logits, grid);
  validate_b(kName, b, grid);
  validate_table_ptr(kName, table, grid);
  check_finite_vec(kName, "grad_log_prob", grad_log_prob, 1, grid.batch, nullptr);
  if (grid.batch * grid.in_len > 0) check_ptr(grad_logits, kName, "grad_logits");
  const int64_t W = grid.out_len + 1, S = table_stride(grid);
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t r = 0; r < grid.batch; ++r) {
    const int64_t n = grid.T_of(r), kk = grid.U_of(r);
    const T g = grad_log_prob[r];
    T* gx = grad_logits + r * grid.in_len;
    std::vector<T> m(static_cast<size_t>(n));
    std::vector<T> dummy(static_cast<size_t>(n), T(0));
    table_adjoint(
        logits + r * grid.in_len, n, kk, table + r * S, W,
        [&](int64_t t, int64_t j) { return (t == 0 && j == kk) ? T(1) : T(0); }, dummy.data(),
        m.data());
    const T* br = b + r * grid.in_len;
    for (int64_t t = 0; t < n; ++t) gx[t] = g * (br[t] - m[static_cast<size_t>(t)]);
    zero(gx + n, grid.in_len - n);
  }
}

template <class T>
void cb_marginals(const T* logits, const T* table, T* marginals, const Grid& grid) {
  const char* kName = "cb_marginals";
  validate_cb(kName, logits, grid);
  validate_table_ptr(kName, table, grid);
  if (grid.batch * grid.in_len > 0) check_ptr(marginals, kName, "marginals");
  const int64_t W = grid.out_len + 1, S = table_stride(grid);
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t r = 0; r < grid.batch; ++r) {
    const int64_t n = grid.T_of(r), kk = grid.U_of(r);
    T* m = marginals + r * grid.in_len;
    std::vector<T> dummy(static_cast<size_t>(n), T(0));
    table_adjoint(
        logits + r * grid.in_len, n, kk, table + r * S, W,
        [&](int64_t t, int64_t j) { return (t == 0 && j == kk) ? T(1) : T(0); }, dummy.data(), m);
    for (int64_t t = 0; t < n; ++t) m[t] = std::min(m[t], T(1));
    zero(m + n, grid.in_len - n);
  }
}

template <class T>
void cb_idb_step_log_probs(const T* logits, const T* b, const T* table, T* step_log_probs,
                           const Grid& grid) {
  const char* kName = "cb_idb_step_log_probs";
  validate_cb(kName, logits, grid);
  validate_b(kName, b, grid);
  validate_table_ptr(kName, table, grid);
  if (grid.batch * grid.in_len > 0) check_ptr(step_log_probs, kName, "step_log_probs");
  const int64_t W = grid.out_len + 1, S = table_stride(grid);
#pragma omp parallel for schedule(static) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t r = 0; r < grid.batch; ++r) {
    const int64_t n = grid.T_of(r), off = r * grid.in_len;
    idb_steps_row(logits + off, b + off, n, grid.U_of(r), table + r * S, W, step_log_probs + off);
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
  if (grid.batch * grid.in_len > 0) check_ptr(grad_logits, kName, "grad_logits");
  const int64_t W = grid.out_len + 1, S = table_stride(grid);
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t r = 0; r < grid.batch; ++r) {
    const int64_t n = grid.T_of(r), kk = grid.U_of(r), off = r * grid.in_len;
    const T* x = logits + off;
    const T* br = b + off;
    const T* g = grad_step + off;
    T* gx = grad_logits + off;
    // step t reads Q[t, j_t] (coefficient -g_t) and Q[t+1, j_{t+1}] (+g_t); j_t = highs left.
    std::vector<int64_t> jt(static_cast<size_t>(n + 1));
    jt[0] = kk;
    for (int64_t t = 0; t < n; ++t) jt[static_cast<size_t>(t + 1)] = jt[static_cast<size_t>(t)] - (br[t] == T(1));
    for (int64_t t = 0; t < n; ++t) gx[t] = g[t] * (br[t] - std::exp(log_sigmoid(x[t])));
    table_adjoint(
        x, n, kk, table + r * S, W,
        [&](int64_t t, int64_t j) {
          if (j != jt[static_cast<size_t>(t)]) return T(0);
          return (t > 0 ? g[t - 1] : T(0)) - g[t];
        },
        gx, static_cast<T*>(nullptr));
    zero(gx + n, grid.in_len - n);
  }
}

template <class T>
void cb_bb_step_log_probs(const T* logits, const T* b, const T* table, T* step_log_probs,
                          const Grid& grid) {
  const char* kName = "cb_bb_step_log_probs";
  validate_cb(kName, logits, grid);
  validate_b(kName, b, grid);
  validate_table_ptr(kName, table, grid);
  if (grid.batch * grid.out_len > 0) check_ptr(step_log_probs, kName, "step_log_probs");
  const int64_t W = grid.out_len + 1, S = table_stride(grid), K = grid.out_len;
#pragma omp parallel for schedule(static) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t r = 0; r < grid.batch; ++r) {
    const int64_t n = grid.T_of(r), kk = grid.U_of(r);
    const auto pos = highs_of(b + r * grid.in_len, n);
    bb_steps_row(logits + r * grid.in_len, pos, kk, table + r * S, W, step_log_probs + r * K);
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
  if (grid.batch * grid.in_len > 0) check_ptr(grad_logits, kName, "grad_logits");
  const int64_t W = grid.out_len + 1, S = table_stride(grid), K = grid.out_len;
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t r = 0; r < grid.batch; ++r) {
    const int64_t n = grid.T_of(r), kk = grid.U_of(r), off = r * grid.in_len;
    const T* x = logits + off;
    const T* g = grad_step + r * K;
    T* gx = grad_logits + off;
    zero(gx, grid.in_len);
    const auto pos = highs_of(b + off, n);
    // Dense seeds: +g_r at (t_r + 1, k - r - 1), -g_r at (t_{r-1} + 1, k - r) (0-based r).
    std::vector<T> seeds(static_cast<size_t>((n + 1) * W), T(0));
    int64_t prev = -1;
    for (int64_t rr = 0; rr < kk; ++rr) {
      const int64_t t = pos[static_cast<size_t>(rr)], m = kk - rr;
      seeds[static_cast<size_t>((t + 1) * W + m - 1)] += g[rr];
      seeds[static_cast<size_t>((prev + 1) * W + m)] -= g[rr];
      gx[t] += g[rr] * (T(1) - std::exp(log_sigmoid(x[t])));
      for (int64_t s = prev + 1; s < t; ++s) gx[s] -= g[rr] * std::exp(log_sigmoid(x[s]));
      prev = t;
    }
    table_adjoint(
        x, n, kk, table + r * S, W,
        [&](int64_t t, int64_t j) { return seeds[static_cast<size_t>(t * W + j)]; }, gx,
        static_cast<T*>(nullptr));
  }
}

template <class T>
void cb_db_step_log_probs(const T* logits, const int64_t* order, T* step_log_probs,
                          const Grid& grid) {
  const char* kName = "cb_db_step_log_probs";
  validate_cb(kName, logits, grid);
  validate_order(kName, "order", order, grid, false);
  if (grid.batch * grid.out_len > 0) check_ptr(step_log_probs, kName, "step_log_probs");
  const int64_t K = grid.out_len;
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t r = 0; r < grid.batch; ++r) {
    const int64_t n = grid.T_of(r), kk = grid.U_of(r);
    const T* x = logits + r * grid.in_len;
    const auto perm = db_permutation(order + r * K, n, kk);
    std::vector<T> xp(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) xp[static_cast<size_t>(i)] = x[perm[static_cast<size_t>(i)]];
    const int64_t W = kk + 1;
    std::vector<T> Qp(static_cast<size_t>((n + 1) * W));
    build_table(xp.data(), n, kk, Qp.data(), W);
    db_steps_row(xp, kk, Qp.data(), W, step_log_probs + r * K);
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
  if (grid.batch * grid.in_len > 0) check_ptr(grad_logits, kName, "grad_logits");
  const int64_t K = grid.out_len;
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t r = 0; r < grid.batch; ++r) {
    const int64_t n = grid.T_of(r), kk = grid.U_of(r);
    const T* x = logits + r * grid.in_len;
    const T* g = grad_step + r * K;
    const auto perm = db_permutation(order + r * K, n, kk);
    std::vector<T> xp(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) xp[static_cast<size_t>(i)] = x[perm[static_cast<size_t>(i)]];
    const int64_t W = kk + 1;
    std::vector<T> Qp(static_cast<size_t>((n + 1) * W));
    build_table(xp.data(), n, kk, Qp.data(), W);
    std::vector<T> gxp(static_cast<size_t>(n), T(0));
    for (int64_t j = 0; j < kk; ++j) {
      gxp[static_cast<size_t>(j)] += g[j] * (T(1) - std::exp(log_sigmoid(xp[static_cast<size_t>(j)])));
    }
    // step j reads Qp[j+1, k-j-1] (+g_j) and Qp[j, k-j] (-g_j): seeds lie on the diagonal
    // t + j' = k, so seed(t, k - t) = g_{t-1} - g_t.
    table_adjoint(
        xp.data(), n, kk, Qp.data(), W,
        [&](int64_t t, int64_t j) {
          if (t > kk || j != kk - t) return T(0);
          return (t > 0 ? g[t - 1] : T(0)) - (t < kk ? g[t] : T(0));
        },
        gxp.data(), static_cast<T*>(nullptr));
    T* gx = grad_logits + r * grid.in_len;
    zero(gx, grid.in_len);
    for (int64_t i = 0; i < n; ++i) gx[perm[static_cast<size_t>(i)]] = gxp[static_cast<size_t>(i)];
  }
}

template <class T>
void cb_sample_idb(const T* logits, const T* table, Rng& rng, T* b, T* step_log_probs,
                   const Grid& grid) {
  const char* kName = "cb_sample_idb";
  validate_cb(kName, logits, grid);
  validate_table_ptr(kName, table, grid);
  if (grid.batch * grid.in_len > 0) check_ptr(b, kName, "b");
  const int64_t W = grid.out_len + 1, S = table_stride(grid);
  const auto seeds = row_seeds(rng, grid.batch);
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t r = 0; r < grid.batch; ++r) {
    const int64_t n = grid.T_of(r), kk = grid.U_of(r), off = r * grid.in_len;
    Rng gen(seeds[static_cast<size_t>(r)]);
    idb_draw_row(logits + off, n, kk, table + r * S, W, gen, b + off);
    zero(b + off + n, grid.in_len - n);
    if (step_log_probs) {
      idb_steps_row(logits + off, b + off, n, kk, table + r * S, W, step_log_probs + off);
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
  if (grid.batch * grid.in_len > 0) check_ptr(b, kName, "b");
  const int64_t W = grid.out_len + 1, S = table_stride(grid), K = grid.out_len;
  const auto seeds = row_seeds(rng, grid.batch);
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t r = 0; r < grid.batch; ++r) {
    const int64_t n = grid.T_of(r), kk = grid.U_of(r), off = r * grid.in_len;
    const T* x = logits + off;
    const T* Q = table + r * S;
    Rng gen(seeds[static_cast<size_t>(r)]);
    T* br = b + off;
    zero(br, grid.in_len);
    std::vector<int64_t> pos(static_cast<size_t>(kk));
    int64_t prev = -1;
    for (int64_t rr = 0; rr < kk; ++rr) {
      const int64_t m = kk - rr, s0 = prev + 1, last = n - m;
      const double u = gen.uniform();
      const T base = Q[s0 * W + m];
      double cum = 0;
      T acc = 0;
      int64_t chosen = last;
      for (int64_t t = s0; t <= last; ++t) {  // inverse CDF of 004 eq. 12
        cum += std::exp(static_cast<double>(log_sigmoid(x[t]) + Q[(t + 1) * W + m - 1] + acc - base));
        if (u < cum) {
          chosen = t;
          break;
        }
        acc += log_sigmoid(-x[t]);
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
      bb_steps_row(x, pos, kk, Q, W, step_log_probs + r * K);
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
  if (grid.batch * grid.in_len > 0) check_ptr(b, kName, "b");
  const int64_t W = grid.out_len + 1, S = table_stride(grid), K = grid.out_len;
  const auto seeds = row_seeds(rng, grid.batch);
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(grid.batch, double(grid.batch) * (grid.out_len + 1) * grid.in_len))
  for (int64_t r = 0; r < grid.batch; ++r) {
    const int64_t n = grid.T_of(r), kk = grid.U_of(r), off = r * grid.in_len;
    const T* x = logits + off;
    Rng gen(seeds[static_cast<size_t>(r)]);
    idb_draw_row(x, n, kk, table + r * S, W, gen, b + off);
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
      const auto perm = db_permutation(ord.data(), n, kk);
      std::vector<T> xp(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) xp[static_cast<size_t>(i)] = x[perm[static_cast<size_t>(i)]];
      const int64_t Wp = kk + 1;
      std::vector<T> Qp(static_cast<size_t>((n + 1) * Wp));
      build_table(xp.data(), n, kk, Qp.data(), Wp);
      db_steps_row(xp, kk, Qp.data(), Wp, step_log_probs + r * K);
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
