// Expected alignment of hard monotonic attention (002 eqs. 13-14): see
// include/mona/core/monotonic.h for the recurrences and docs/math.md section 2 for the
// derivation of the backward pass.
#include "mona/core/monotonic.h"

#include <algorithm>
#include <vector>

#include "parallel.h"
#include "targets.h"
#include "validate.h"

// The kernels of this compilation's target (targets.h).
MONA_TARGET_BEGIN
namespace {

// The recurrences q and gq run along a whole row, so their rounding errors add up over T
// steps; float inputs carry them in double (scalar code: the same speed), which keeps the
// float kernels within a few float ulps of the exact result (bench/train: hard case).
template <class T>
struct Acc {
  using type = double;
};
template <>
struct Acc<long double> {
  using type = long double;
};

// K consecutive rows i0 .. i0+K-1 of the forward recurrence over the n valid entries:
// row r reads alpha[i0+r-1, j], which row r-1 produced at the same j. Interleaving the
// rows in one j loop gives the CPU K recurrences to overlap (the dependency graph is a
// grid whose critical path is n + K, not n * K). `out` rows may alias `a`: a[j] is read
// before out[0][j] is written. Row r lives at p + r * stride, out + r * stride.
template <class T, int K>
inline void rows_forward(int64_t n, const T* p, const T* a, T* out, int64_t stride) {
  using A = typename Acc<T>::type;
  A q[K] = {};
  A keep[K] = {};  // 1 - p[r][j-1]; q starts at 0 so its value at j = 0 does not matter
  for (int64_t j = 0; j < n; ++j) {
    A in = a[j];
    for (int r = 0; r < K; ++r) {
      const A pj = p[r * stride + j];
      q[r] = keep[r] * q[r] + in;
      keep[r] = A(1) - pj;
      in = pj * q[r];
      out[r * stride + j] = static_cast<T>(in);
    }
  }
}

// Backward of K consecutive rows (see the header for the recurrences). On entry
// g[j] = dL/dalpha[i0+K-1, j] flowing from below (without the caller's grad_alpha); on
// exit g[j] = dL/dalpha[i0-1, j]. `prev` is alpha[i0-1, :]; the rows' own alphas are read
// at alpha + r * stride for r < K-1. grad_p rows first hold q, then dL/dp.
template <class T, int K>
inline void rows_backward(int64_t n, const T* p, const T* prev, const T* alpha,
                          const T* grad_alpha, T* g, T* grad_p, int64_t stride) {
  using A = typename Acc<T>::type;
  {  // recompute q for each row: K independent recurrences
    A q[K] = {};
    A keep[K] = {};
    for (int64_t j = 0; j < n; ++j) {
      for (int r = 0; r < K; ++r) {
        const A in = r == 0 ? prev[j] : alpha[(r - 1) * stride + j];
        q[r] = keep[r] * q[r] + in;
        keep[r] = A(1) - A(p[r * stride + j]);
        grad_p[r * stride + j] = static_cast<T>(q[r]);
      }
    }
  }
  A gq_next[K] = {};  // gq[r, j+1]; gq[r, n] = 0
  for (int64_t j = n - 1; j >= 0; --j) {
    A from_below = g[j];
    for (int r = K - 1; r >= 0; --r) {
      const int64_t k = r * stride + j;
      const A G = A(grad_alpha[k]) + from_below;
      const A pj = p[k];
      const A gq = G * pj + (A(1) - pj) * gq_next[r];
      grad_p[k] = static_cast<T>(A(grad_p[k]) * (G - gq_next[r]));
      gq_next[r] = gq;
      from_below = gq;
    }
    g[j] = static_cast<T>(from_below);
  }
}

// One row (K = 1), as used by the step API.
template <class T>
inline void row_forward(int64_t n, const T* p, const T* a, T* out) {
  rows_forward<T, 1>(n, p, a, out, 0);
}

// One row of the step backward: g holds dL/dalpha[i, :] on entry (the caller's
// grad_alpha) and dL/dalpha[i-1, :] on exit.
template <class T>
inline void row_backward(int64_t n, const T* p, const T* a, T* g, T* grad_p) {
  using A = typename Acc<T>::type;
  A q = 0;
  A keep = 0;
  for (int64_t j = 0; j < n; ++j) {
    q = keep * q + A(a[j]);
    keep = A(1) - A(p[j]);
    grad_p[j] = static_cast<T>(q);
  }
  A gq_next = 0;
  for (int64_t j = n - 1; j >= 0; --j) {
    const A G = g[j];
    const A pj = p[j];
    const A gq = G * pj + (A(1) - pj) * gq_next;
    grad_p[j] = static_cast<T>(A(grad_p[j]) * (G - gq_next));
    g[j] = static_cast<T>(gq);
    gq_next = gq;
  }
}

constexpr int kRowBlock = 4;  // rows interleaved per pass

template <class T>
void fill_zero(T* x, int64_t n) {
  std::fill(x, x + n, T(0));
}

void check_ptr(const void* ptr, const char* kernel, const char* name) {
  mona::detail::check(ptr != nullptr, kernel, ": ", name, " must not be null");
}

}  // namespace

template <class T>
void monotonic_alignment(const T* p, const Opt<T>* alpha0, T* alpha, const Grid& grid) {
  const char* kName = "monotonic_alignment";
  grid.validate(kName);
  if (grid.numel() > 0) {
    check_ptr(p, kName, "p");
    check_ptr(alpha, kName, "alpha");
  }
  detail::check_probabilities(kName, "p", p, grid);
  if (alpha0) {
    detail::check_nonnegative(kName, "alpha0",
                              alpha0, detail::rows_grid(grid.batch, grid.in_len, grid.in_lens));
  }
  const int64_t B = grid.batch, U = grid.out_len, Tn = grid.in_len;
  std::vector<T> delta(static_cast<size_t>(std::max<int64_t>(Tn, 1)), T(0));
  delta[0] = T(1);

#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(B, double(B) * U * Tn))
  for (int64_t b = 0; b < B; ++b) {
    const int64_t Ub = grid.U_of(b), Tb = grid.T_of(b);
    const T* prev = alpha0 ? alpha0 + b * Tn : delta.data();
    int64_t i = 0;
    for (; i + kRowBlock <= Ub; i += kRowBlock) {
      const int64_t off = (b * U + i) * Tn;
      rows_forward<T, kRowBlock>(Tb, p + off, prev, alpha + off, Tn);
      prev = alpha + off + (kRowBlock - 1) * Tn;
    }
    for (; i < Ub; ++i) {
      const int64_t off = (b * U + i) * Tn;
      rows_forward<T, 1>(Tb, p + off, prev, alpha + off, Tn);
      prev = alpha + off;
    }
    for (i = 0; i < Ub; ++i) fill_zero(alpha + (b * U + i) * Tn + Tb, Tn - Tb);
    fill_zero(alpha + (b * U + Ub) * Tn, (U - Ub) * Tn);
  }
}

template <class T>
void monotonic_alignment_backward(const T* grad_alpha, const T* p, const Opt<T>* alpha0,
                                  const T* alpha, T* grad_p, Opt<T>* grad_alpha0,
                                  const Grid& grid) {
  const char* kName = "monotonic_alignment_backward";
  grid.validate(kName);
  if (grid.numel() > 0) {
    check_ptr(grad_alpha, kName, "grad_alpha");
    check_ptr(p, kName, "p");
    check_ptr(alpha, kName, "alpha");
    check_ptr(grad_p, kName, "grad_p");
  }
  detail::check_probabilities(kName, "p", p, grid);
  detail::check_finite(kName, "grad_alpha", grad_alpha, grid);
  // The saved forward values, like every kernel's: a NaN here would become NaN gradients.
  detail::check_nonnegative(kName, "alpha", alpha, grid);
  if (alpha0) {
    detail::check_nonnegative(kName, "alpha0",
                              alpha0, detail::rows_grid(grid.batch, grid.in_len, grid.in_lens));
  }
  const int64_t B = grid.batch, U = grid.out_len, Tn = grid.in_len;
  std::vector<T> delta(static_cast<size_t>(std::max<int64_t>(Tn, 1)), T(0));
  delta[0] = T(1);
  std::vector<T> scratch;
  if (!grad_alpha0) {
    scratch.resize(static_cast<size_t>(B * Tn));
    grad_alpha0 = scratch.data();
  }

#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(B, double(B) * U * Tn))
  for (int64_t b = 0; b < B; ++b) {
    const int64_t Ub = grid.U_of(b), Tb = grid.T_of(b);
    T* g = grad_alpha0 + b * Tn;  // carries dL/dalpha[i, :] up the rows
    fill_zero(g, Tn);
    const T* first_prev = alpha0 ? alpha0 + b * Tn : delta.data();
    // Rows Ub-1 .. 0 in blocks of kRowBlock from the bottom; the leftover rows at the top.
    int64_t end = Ub;  // rows [end - K, end) form the next block
    for (; end - kRowBlock >= 0; end -= kRowBlock) {
      const int64_t i0 = end - kRowBlock, off = (b * U + i0) * Tn;
      const T* prev = i0 > 0 ? alpha + off - Tn : first_prev;
      rows_backward<T, kRowBlock>(Tb, p + off, prev, alpha + off, grad_alpha + off, g,
                                  grad_p + off, Tn);
    }
    for (int64_t i0 = end - 1; i0 >= 0; --i0) {
      const int64_t off = (b * U + i0) * Tn;
      const T* prev = i0 > 0 ? alpha + off - Tn : first_prev;
      rows_backward<T, 1>(Tb, p + off, prev, alpha + off, grad_alpha + off, g, grad_p + off,
                          Tn);
    }
    for (int64_t i = 0; i < Ub; ++i) fill_zero(grad_p + (b * U + i) * Tn + Tb, Tn - Tb);
    fill_zero(grad_p + (b * U + Ub) * Tn, (U - Ub) * Tn);
  }
}

template <class T>
void monotonic_alignment_step(const T* p, const T* alpha_prev, T* alpha, int64_t batch,
                              int64_t in_len, const int64_t* in_lens) {
  const char* kName = "monotonic_alignment_step";
  const detail::ValueGrid grid = detail::rows_grid(batch, in_len, in_lens);
  grid.validate(kName);
  if (grid.numel() > 0) {
    check_ptr(p, kName, "p");
    check_ptr(alpha_prev, kName, "alpha_prev");
    check_ptr(alpha, kName, "alpha");
  }
  detail::check_probabilities(kName, "p", p, grid);
  detail::check_nonnegative(kName, "alpha_prev", alpha_prev, grid);
#pragma omp parallel for schedule(static) if (detail::worth_parallel(batch, double(batch) * in_len))
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t Tb = grid.T_of(b), off = b * in_len;
    row_forward(Tb, p + off, alpha_prev + off, alpha + off);
    fill_zero(alpha + off + Tb, in_len - Tb);
  }
}

template <class T>
void monotonic_alignment_step_backward(const T* grad_alpha, const T* p, const T* alpha_prev,
                                       T* grad_p, T* grad_alpha_prev, int64_t batch,
                                       int64_t in_len, const int64_t* in_lens) {
  const char* kName = "monotonic_alignment_step_backward";
  const detail::ValueGrid grid = detail::rows_grid(batch, in_len, in_lens);
  grid.validate(kName);
  if (grid.numel() > 0) {
    check_ptr(grad_alpha, kName, "grad_alpha");
    check_ptr(p, kName, "p");
    check_ptr(alpha_prev, kName, "alpha_prev");
    check_ptr(grad_p, kName, "grad_p");
    check_ptr(grad_alpha_prev, kName, "grad_alpha_prev");
  }
  detail::check_probabilities(kName, "p", p, grid);
  detail::check_finite(kName, "grad_alpha", grad_alpha, grid);
  detail::check_nonnegative(kName, "alpha_prev", alpha_prev, grid);
#pragma omp parallel for schedule(static) if (detail::worth_parallel(batch, double(batch) * in_len))
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t Tb = grid.T_of(b), off = b * in_len;
    T* g = grad_alpha_prev + off;
    if (g != grad_alpha + off) std::copy(grad_alpha + off, grad_alpha + off + Tb, g);
    row_backward(Tb, p + off, alpha_prev + off, g, grad_p + off);
    fill_zero(g + Tb, in_len - Tb);
    fill_zero(grad_p + off + Tb, in_len - Tb);
  }
}

#define MONA_INSTANTIATE(T)                                                              \
  template void monotonic_alignment<T>(const T*, const T*, T*, const Grid&);             \
  template void monotonic_alignment_backward<T>(const T*, const T*, const T*, const T*, \
                                                T*, T*, const Grid&);                    \
  template void monotonic_alignment_step<T>(const T*, const T*, T*, int64_t, int64_t,    \
                                            const int64_t*);                             \
  template void monotonic_alignment_step_backward<T>(const T*, const T*, const T*, T*,   \
                                                     T*, int64_t, int64_t, const int64_t*);
MONA_INSTANTIATE(float)
MONA_INSTANTIATE(double)
MONA_TARGET_END

#if MONA_TARGET_ENTRY_POINTS
// The public entry points, compiled once: each runs the selected target's kernel.
#define MONA_DECLARE_TARGET target_v3
#include "target_kernels.h"
#undef MONA_DECLARE_TARGET

namespace mona::core {

template <class T>
void monotonic_alignment(const T* p, const Opt<T>* alpha0, T* alpha, const Grid& grid) {
  MONA_TARGET_DISPATCH(monotonic_alignment<T>, p, alpha0, alpha, grid);
}

template <class T>
void monotonic_alignment_backward(const T* grad_alpha, const T* p, const Opt<T>* alpha0,
                                  const T* alpha, T* grad_p, Opt<T>* grad_alpha0,
                                  const Grid& grid) {
  MONA_TARGET_DISPATCH(monotonic_alignment_backward<T>, grad_alpha, p, alpha0, alpha, grad_p,
                       grad_alpha0, grid);
}

template <class T>
void monotonic_alignment_step(const T* p, const T* alpha_prev, T* alpha, int64_t batch,
                              int64_t in_len, const int64_t* in_lens) {
  MONA_TARGET_DISPATCH(monotonic_alignment_step<T>, p, alpha_prev, alpha, batch, in_len, in_lens);
}

template <class T>
void monotonic_alignment_step_backward(const T* grad_alpha, const T* p, const T* alpha_prev,
                                       T* grad_p, T* grad_alpha_prev, int64_t batch,
                                       int64_t in_len, const int64_t* in_lens) {
  MONA_TARGET_DISPATCH(monotonic_alignment_step_backward<T>, grad_alpha, p, alpha_prev, grad_p,
                       grad_alpha_prev, batch, in_len, in_lens);
}

MONA_INSTANTIATE(float)
MONA_INSTANTIATE(double)

}  // namespace mona::core
#endif  // MONA_TARGET_ENTRY_POINTS
