// GMM, SAGMM and SAGMM-tr attention weights, backward, length penalty and online step
// (003 eqs. 4-20, Algorithm 1 of A.2): see include/mona/core/gmm.h for the formulas and
// docs/math/gmm.md for the derivations.
#include "mona/core/gmm.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "parallel.h"
#include "validate.h"

namespace mona::core {
namespace {

constexpr double kLog2Pi = 1.8378770664093454835606594728112;  // log(2 pi)

// log of the Gaussian's normaliser, -0.5 log(2 pi v): the single place it is computed.
template <class T>
inline T log_norm_const(T variance) {
  return T(-0.5) * (static_cast<T>(kLog2Pi) + std::log(variance));
}

// N(x; mu, v) in one exponent (see the header: exactly 0 far from mu, never NaN), with
// sd = sqrt(v) computed once per Gaussian by the caller. The distance is divided by sd
// before it is squared: (x - mu)^2 / (2 v) as written overflows to inf / inf = NaN when both
// (x - mu)^2 and 2 v exceed the largest value (v = 1e308, mu = 2e154: 003 eq. 11 gives
// 5.4e-156), and to inf / finite = a density of 0 when only (x - mu)^2 does.
template <class T>
inline T normal_pdf(T x, T mu, T sd, T log_c) {
  const T z = (x - mu) / sd;
  return std::exp(log_c - T(0.5) * z * z);
}

template <class T>
inline T position(const T* nu, int64_t j) {
  return nu ? nu[j] : static_cast<T>(j + 1);
}

template <class T>
inline T scale(const T* delta, int64_t j) {
  return delta ? delta[j] : T(1);
}

// Grid of a [B, U, H] parameter tensor: rows follow out_lens, all H columns valid.
Grid head_grid(const Grid& g, int64_t num_heads) {
  Grid h;
  h.batch = g.batch;
  h.out_len = g.out_len;
  h.in_len = num_heads;
  h.out_lens = g.out_lens;
  return h;
}

// Argument checks shared by forward and backward.
template <class T>
void check_inputs(const char* kName, const T* mu, const T* variance, const T* weights,
                  const T* nu, const T* delta, int64_t num_heads, const Grid& grid,
                  const GmmOptions& options) {
  options.validate();
  mona::detail::check(num_heads >= 1, kName, ": num_heads (H, the last dimension of mu) must be >= 1, got ", num_heads);
  grid.validate(kName);
  if (grid.batch * grid.out_len > 0) {
    detail::check_ptr(mu, kName, "mu");
    detail::check_ptr(variance, kName, "variance");
  }
  const Grid hg = head_grid(grid, num_heads);
  detail::check_finite(kName, "mu", mu, hg);
  detail::check_values(kName, "variance", variance, hg, "finite values > 0",
                       [](T v) { return (v > T(0)) & ((v - v) == T(0)); });
  if (weights) detail::check_nonnegative(kName, "weights", weights, hg);
  const detail::ValueGrid rg = detail::rows_grid(grid.batch, grid.in_len, grid.in_lens);
  if (nu) detail::check_finite(kName, "nu", nu, rg);
  if (delta) detail::check_nonnegative(kName, "delta", delta, rg);
}

// The entries row (b, i) of head h may attend to: [j0, j1), plus the elementwise bounds
// test of kAdaptive (lo < nu_j < hi). `gamma` is the head's kFixed state (gamma_{i-1} on
// entry, gamma_i on exit).
template <class T>
struct RowWindow {
  int64_t j0 = 0, j1 = 0;
  bool bounded = false;
  T lo = 0, hi = 0;
  bool contains(T x) const { return !bounded || (lo < x && x < hi); }
};

template <class T>
RowWindow<T> row_window(T mu, T variance, const T* nu, int64_t Tb, const GmmOptions& opt,
                        int64_t& gamma) {
  RowWindow<T> w;
  w.j1 = Tb;
  if (opt.window == GmmWindow::kAdaptive) {
    w.bounded = true;
    gmm_window_bounds(mu, variance, opt.radius, &w.lo, &w.hi);
  } else if (opt.window == GmmWindow::kFixed) {
    if (gamma >= Tb) {  // only possible for Tb = 0
      w.j1 = 0;
      return w;
    }
    int64_t best = gamma;
    T best_d = std::abs(position(nu, gamma) - mu);
    for (int64_t j = gamma + 1; j < Tb; ++j) {
      const T d = std::abs(position(nu, j) - mu);
      if (d < best_d) {
        best_d = d;
        best = j;
      }
    }
    gamma = best;
    const int64_t m = gmm_fixed_half_width(opt.width);
    w.j0 = std::max<int64_t>(0, best - m);
    w.j1 = std::min<int64_t>(Tb, best + m + 1);
  }
  return w;
}

}  // namespace

std::string GmmOptions::ToString() const {
  std::ostringstream os;
  os << "GmmOptions(window=";
  switch (window) {
    case GmmWindow::kNone: os << "none"; break;
    case GmmWindow::kAdaptive: os << "adaptive, radius=" << radius; break;
    case GmmWindow::kFixed: os << "fixed, width=" << width; break;
  }
  os << ")";
  return os.str();
}

template <class T>
void gmm_attention(const T* mu, const T* variance, const Opt<T>* weights, const Opt<T>* nu,
                   const Opt<T>* delta, T* alpha, int64_t num_heads, const Grid& grid,
                   const GmmOptions& options) {
  const char* kName = "gmm_attention";
  check_inputs(kName, mu, variance, weights, nu, delta, num_heads, grid, options);
  if (grid.numel() > 0) detail::check_ptr(alpha, kName, "alpha");
  const int64_t B = grid.batch, U = grid.out_len, Tn = grid.in_len, H = num_heads;

#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(B, double(grid.numel()) * H))
  for (int64_t b = 0; b < B; ++b) {
    const int64_t Ub = grid.U_of(b), Tb = grid.T_of(b);
    const T* nu_b = nu ? nu + b * Tn : nullptr;
    const T* delta_b = delta ? delta + b * Tn : nullptr;
    std::vector<int64_t> gamma(static_cast<size_t>(H), 0);
    for (int64_t i = 0; i < Ub; ++i) {
      T* row = alpha + (b * U + i) * Tn;
      detail::fill_zero(row, Tn);
      for (int64_t h = 0; h < H; ++h) {
        const int64_t k = (b * U + i) * H + h;
        const T m = mu[k], v = variance[k], w = weights ? weights[k] : T(1);
        const RowWindow<T> win = row_window(m, v, nu_b, Tb, options, gamma[h]);
        const T log_c = log_norm_const(v), sd = std::sqrt(v);
        for (int64_t j = win.j0; j < win.j1; ++j) {
          const T x = position(nu_b, j);
          if (!win.contains(x)) continue;
          row[j] += w * normal_pdf(x, m, sd, log_c);
        }
      }
      if (delta_b) {
        for (int64_t j = 0; j < Tb; ++j) row[j] *= delta_b[j];
      }
    }
    detail::fill_zero(alpha + (b * U + Ub) * Tn, (U - Ub) * Tn);
  }
}

template <class T>
void gmm_attention_backward(const T* grad_alpha, const T* mu, const T* variance,
                            const Opt<T>* weights, const Opt<T>* nu, const Opt<T>* delta,
                            Opt<T>* grad_mu, Opt<T>* grad_variance, Opt<T>* grad_weights,
                            Opt<T>* grad_nu, Opt<T>* grad_delta, int64_t num_heads,
                            const Grid& grid, const GmmOptions& options) {
  const char* kName = "gmm_attention_backward";
  check_inputs(kName, mu, variance, weights, nu, delta, num_heads, grid, options);
  if (grid.numel() > 0) detail::check_ptr(grad_alpha, kName, "grad_alpha");
  detail::check_finite(kName, "grad_alpha", grad_alpha, grid);
  const int64_t B = grid.batch, U = grid.out_len, Tn = grid.in_len, H = num_heads;

#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(B, double(grid.numel()) * H))
  for (int64_t b = 0; b < B; ++b) {
    const int64_t Ub = grid.U_of(b), Tb = grid.T_of(b);
    const T* nu_b = nu ? nu + b * Tn : nullptr;
    const T* delta_b = delta ? delta + b * Tn : nullptr;
    T* gnu = grad_nu ? grad_nu + b * Tn : nullptr;
    T* gdelta = grad_delta ? grad_delta + b * Tn : nullptr;
    if (gnu) detail::fill_zero(gnu, Tn);
    if (gdelta) detail::fill_zero(gdelta, Tn);
    std::vector<int64_t> gamma(static_cast<size_t>(H), 0);
    for (int64_t i = 0; i < Ub; ++i) {
      const T* G = grad_alpha + (b * U + i) * Tn;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t k = (b * U + i) * H + h;
        const T m = mu[k], v = variance[k], w = weights ? weights[k] : T(1);
        const RowWindow<T> win = row_window(m, v, nu_b, Tb, options, gamma[h]);
        const T log_c = log_norm_const(v), sd = std::sqrt(v);
        T gw = 0, gm = 0, gv = 0;
        for (int64_t j = win.j0; j < win.j1; ++j) {
          const T pos = position(nu_b, j);
          if (!win.contains(pos)) continue;
          const T n = normal_pdf(pos, m, sd, log_c);
          if (n == T(0)) continue;  // far entry: every term is exactly 0
          const T d = pos - m;
          const T x = d / v;
          const T gn = G[j] * scale(delta_b, j);  // dL/d(w n)
          const T a = gn * w * n;                  // dL/dn * n
          gw += gn * n;
          gm += a * x;
          gv += a * (d * x - T(1)) / (T(2) * v);
          if (gnu) gnu[j] -= a * x;
          if (gdelta) gdelta[j] += G[j] * w * n;
        }
        if (grad_mu) grad_mu[k] = gm;
        if (grad_variance) grad_variance[k] = gv;
        if (grad_weights) grad_weights[k] = gw;
      }
    }
    const int64_t pad = (U - Ub) * H, off = (b * U + Ub) * H;
    if (grad_mu) detail::fill_zero(grad_mu + off, pad);
    if (grad_variance) detail::fill_zero(grad_variance + off, pad);
    if (grad_weights) detail::fill_zero(grad_weights + off, pad);
  }
}

namespace {

template <class T>
void check_penalty_inputs(const char* kName, const T* mu, const T* nu, int64_t num_heads,
                          const Grid& grid, double lambda) {
  mona::detail::check(num_heads >= 1, kName, ": num_heads (H, the last dimension of mu) must be >= 1, got ", num_heads);
  mona::detail::check(std::isfinite(lambda) && lambda >= 0.0, kName,
                      ": lambda: expected a finite value >= 0, got ", lambda);
  grid.validate(kName);
  if (grid.batch * grid.out_len > 0) detail::check_ptr(mu, kName, "mu");
  detail::check_finite(kName, "mu", mu, head_grid(grid, num_heads));
  if (nu) detail::check_finite(kName, "nu", nu, detail::rows_grid(grid.batch, grid.in_len,
                                                                  grid.in_lens));
}

}  // namespace

template <class T>
void gmm_length_penalty(const T* mu, const Opt<T>* nu, T* loss, int64_t num_heads,
                        const Grid& grid, double lambda) {
  const char* kName = "gmm_length_penalty";
  check_penalty_inputs(kName, mu, nu, num_heads, grid, lambda);
  if (grid.batch > 0) detail::check_ptr(loss, kName, "loss");
  const int64_t H = num_heads;
  for (int64_t b = 0; b < grid.batch; ++b) {
    const int64_t I = grid.U_of(b), J = grid.T_of(b);
    const T target = static_cast<T>(std::min(I, J));
    T sum = 0;
    for (int64_t h = 0; h < H; ++h) {
      const T last = I > 0 ? mu[(b * grid.out_len + I - 1) * H + h] : T(0);
      sum += (last - target) * (last - target);
    }
    const T last_nu = J > 0 ? position(nu ? nu + b * grid.in_len : nullptr, J - 1) : T(0);
    sum += (last_nu - target) * (last_nu - target);
    loss[b] = static_cast<T>(lambda) * sum;
  }
}

template <class T>
void gmm_length_penalty_backward(const T* grad_loss, const T* mu, const Opt<T>* nu,
                                 Opt<T>* grad_mu, Opt<T>* grad_nu, int64_t num_heads,
                                 const Grid& grid, double lambda) {
  const char* kName = "gmm_length_penalty_backward";
  check_penalty_inputs(kName, mu, nu, num_heads, grid, lambda);
  if (grid.batch > 0) detail::check_ptr(grad_loss, kName, "grad_loss");
  for (int64_t b = 0; b < grid.batch; ++b) {
    mona::detail::check(std::isfinite(grad_loss[b]), kName,
                        ": grad_loss: expected finite values, got ",
                        static_cast<double>(grad_loss[b]), " at [", b, "]");
  }
  const int64_t H = num_heads, U = grid.out_len, Tn = grid.in_len;
  if (grad_mu) detail::fill_zero(grad_mu, grid.batch * U * H);
  if (grad_nu) detail::fill_zero(grad_nu, grid.batch * Tn);
  for (int64_t b = 0; b < grid.batch; ++b) {
    const int64_t I = grid.U_of(b), J = grid.T_of(b);
    const T target = static_cast<T>(std::min(I, J));
    const T scale2 = T(2) * static_cast<T>(lambda) * grad_loss[b];
    if (grad_mu && I > 0) {
      for (int64_t h = 0; h < H; ++h) {
        const int64_t k = (b * U + I - 1) * H + h;
        grad_mu[k] = scale2 * (mu[k] - target);
      }
    }
    if (grad_nu && J > 0) {
      grad_nu[b * Tn + J - 1] = scale2 * (position(nu ? nu + b * Tn : nullptr, J - 1) - target);
    }
  }
}

namespace {

// gmm_online_step without the restoring of the cursor on an error.
template <class T>
GmmStepResult online_step(T mu, T variance, const T* nu, const Opt<T>* delta, int64_t available,
                          bool input_finished, const GmmOptions& options, GmmCursor& cursor, T* weights) {
  const char* kName = "gmm_online_step";
  options.validate();
  mona::detail::check(std::isfinite(mu), kName, ": mu: expected a finite value, got ",
                      static_cast<double>(mu));
  mona::detail::check(std::isfinite(variance) && variance > T(0), kName,
                      ": variance: expected a finite value > 0, got ",
                      static_cast<double>(variance));
  mona::detail::check(available >= 0, kName, ": available must be >= 0, got ", available);
  if (available > 0) {
    detail::check_ptr(nu, kName, "nu");
    detail::check_ptr(weights, kName, "weights");
  }
  if (cursor.pending) {
    mona::detail::check(static_cast<double>(mu) == cursor.mu &&
                            static_cast<double>(variance) == cursor.variance,
                        kName, ": a step is pending for mu=", cursor.mu, ", variance=",
                        cursor.variance, "; got mu=", static_cast<double>(mu),
                        ", variance=", static_cast<double>(variance));
  }
  const int64_t last_seen = std::max({cursor.begin, cursor.gamma, cursor.next});
  mona::detail::check(last_seen <= available, kName, ": available (", available,
                      ") is less than the frames already used (", last_seen, ")");

  GmmStepResult r;
  // Reads nu_j (counted) and checks monotonicity against nu_{j-1} when j - 1 is at hand.
  auto read = [&](int64_t j) {
    ++r.touched;
    const T x = nu[j];
    mona::detail::check(std::isfinite(x), kName, ": nu: expected finite values, got ",
                        static_cast<double>(x), " at [", j, "]");
    return x;
  };
  auto check_order = [&](int64_t j, T x) {  // x = nu[j], j >= 1
    const T prev = nu[j - 1];
    mona::detail::check(prev <= x, kName, ": nu: expected nondecreasing values, got ",
                        static_cast<double>(prev), " then ", static_cast<double>(x),
                        " at [", j - 1, "], [", j, "]");
  };
  auto pend = [&]() {
    if (!cursor.pending) {
      cursor.pending = true;
      cursor.mu = static_cast<double>(mu);
      cursor.variance = static_cast<double>(variance);
    }
    r.status = ScanStatus::kNeedMoreInput;
    cursor.touched += r.touched;
    return r;
  };
  auto emit = [&](int64_t begin, int64_t end) {
    const T log_c = log_norm_const(variance), sd = std::sqrt(variance);
    for (int64_t j = begin; j < end; ++j) {
      ++r.touched;
      const T n = normal_pdf(nu[j], mu, sd, log_c);
      const T d = delta ? delta[j] : T(1);
      mona::detail::check(d >= T(0) && std::isfinite(d), kName,
                          ": delta: expected finite values >= 0, got ",
                          static_cast<double>(d), " at [", j, "]");
      // Same operations as the offline kernel with H = 1 and w = 1: bit-identical.
      weights[j - begin] = (T(0) + T(1) * n) * d;
    }
    r.status = ScanStatus::kChose;
    r.begin = begin;
    r.end = end;
    cursor.pending = false;
    cursor.located = false;
    cursor.best = -1;
    cursor.touched += r.touched;
    return r;
  };

  switch (options.window) {
    case GmmWindow::kNone: {
      if (!input_finished) return pend();
      for (int64_t j = 1; j < available; ++j) check_order(j, nu[j]);
      return emit(0, available);
    }
    case GmmWindow::kAdaptive: {
      T lo, hi;
      gmm_window_bounds(mu, variance, options.radius, &lo, &hi);
      if (!cursor.pending) {
        // New output step: walk the window start back from the previous step's while the
        // frame before it lies above this step's lower bound (a wider or earlier window),
        // then forward below. Exact for any mu since nu is nondecreasing; with mu
        // nondecreasing (003 eq. 5) every frame walked over belongs to one of the windows.
        int64_t s = std::min(cursor.begin, available);
        while (s > 0 && read(s - 1) > lo) --s;
        cursor.next = s;
        cursor.located = false;
      }
      int64_t j = cursor.next;
      if (!cursor.located) {  // skip frames at or below the lower bound
        while (j < available) {
          const T x = read(j);
          if (j > 0) check_order(j, x);
          if (x > lo) {
            cursor.located = true;
            break;
          }
          ++j;
        }
        cursor.begin = j;
        cursor.next = j;
        if (!cursor.located) {
          if (input_finished) return emit(available, available);
          return pend();
        }
      }
      const int64_t begin = cursor.begin;
      for (; j < available; ++j) {  // the window: frames below the upper bound
        const T x = read(j);
        if (j > 0) check_order(j, x);
        if (x >= hi) {  // no later frame can enter the window: emit
          cursor.next = j;
          return emit(begin, j);
        }
      }
      cursor.next = j;
      if (input_finished) return emit(begin, available);
      return pend();
    }
    case GmmWindow::kFixed: {
      if (!cursor.pending) {
        cursor.next = cursor.gamma;
        cursor.best = -1;
        cursor.located = false;
      }
      int64_t j = cursor.next;
      if (!cursor.located) {
        T best_d = cursor.best >= 0 ? std::abs(nu[cursor.best] - mu) : T(0);
        while (j < available) {
          const T x = read(j);
          if (j > cursor.gamma) check_order(j, x);
          const T d = std::abs(x - mu);
          if (cursor.best < 0 || d < best_d) {
            best_d = d;
            cursor.best = j;
          }
          ++j;
          if (x >= mu) {  // later frames are no nearer (nu nondecreasing)
            cursor.located = true;
            break;
          }
        }
        cursor.next = j;
        if (!cursor.located && input_finished) cursor.located = true;
        if (!cursor.located) return pend();
      }
      if (cursor.best < 0) {  // finished input with no frame at or after gamma_{i-1}
        r.gamma = cursor.gamma;
        return emit(available, available);
      }
      const int64_t g = cursor.best, m = gmm_fixed_half_width(options.width);
      if (g + m >= available && !input_finished) return pend();
      cursor.gamma = g;
      r.gamma = g;
      const int64_t begin = std::max<int64_t>(0, g - m);
      const int64_t end = std::min<int64_t>(available, g + m + 1);
      for (int64_t k = std::max<int64_t>(begin, cursor.next); k < end; ++k) {
        if (k > 0) check_order(k, read(k));
      }
      cursor.next = g;
      return emit(begin, end);
    }
  }
  mona::detail::fail(kName, ": unknown window kind");
}

}  // namespace

template <class T>
GmmStepResult gmm_online_step(T mu, T variance, const T* nu, const Opt<T>* delta,
                              int64_t available, bool input_finished,
                              const GmmOptions& options, GmmCursor& cursor, T* weights) {
  // A value that fails its check (nu, delta) is found while the window is being walked, after
  // the cursor has moved: the cursor is given back as it was, so that a caller who catches
  // the error holds the stream's state from before the call.
  const GmmCursor before = cursor;
  try {
    return online_step(mu, variance, nu, delta, available, input_finished, options, cursor, weights);
  } catch (...) {
    cursor = before;
    throw;
  }
}

#define MONA_INSTANTIATE(T)                                                                \
  template void gmm_attention<T>(const T*, const T*, const T*, const T*, const T*, T*,     \
                                 int64_t, const Grid&, const GmmOptions&);                 \
  template void gmm_attention_backward<T>(const T*, const T*, const T*, const T*,          \
                                          const T*, const T*, T*, T*, T*, T*, T*, int64_t, \
                                          const Grid&, const GmmOptions&);                 \
  template void gmm_length_penalty<T>(const T*, const T*, T*, int64_t, const Grid&,        \
                                      double);                                             \
  template void gmm_length_penalty_backward<T>(const T*, const T*, const T*, T*, T*,       \
                                               int64_t, const Grid&, double);              \
  template GmmStepResult gmm_online_step<T>(T, T, const T*, const T*, int64_t, bool,       \
                                            const GmmOptions&, GmmCursor&, T*);
MONA_INSTANTIATE(float)
MONA_INSTANTIATE(double)
#undef MONA_INSTANTIATE

}  // namespace mona::core
