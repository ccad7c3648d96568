// Masked softmax and its backward; see include/mona/core/softmax.h.
#include "mona/core/softmax.h"

#include <algorithm>
#include <cmath>

#include "parallel.h"
#include "validate.h"

namespace mona::core {
namespace {

// Softmax of x[0..n) into out (may alias x); n >= 1, x finite.
template <class T>
inline void softmax_row(const T* x, int64_t n, T* out) {
  T m = x[0];
  for (int64_t j = 1; j < n; ++j) m = std::max(m, x[j]);
  T z = 0;
  for (int64_t j = 0; j < n; ++j) {
    out[j] = std::exp(x[j] - m);
    z += out[j];
  }
  const T inv = T(1) / z;  // z >= 1: the max entry contributes exp(0)
  for (int64_t j = 0; j < n; ++j) out[j] *= inv;
}

}  // namespace

template <class T>
void softmax(const T* e, T* w, const Grid& grid) {
  const char* kName = "softmax";
  grid.validate(kName);
  if (grid.numel() > 0) {
    detail::check_ptr(e, kName, "e");
    detail::check_ptr(w, kName, "w");
  }
  detail::check_finite(kName, "e", e, grid);
  const int64_t B = grid.batch, U = grid.out_len, Tn = grid.in_len;
#pragma omp parallel for schedule(static) if (detail::worth_parallel(B, double(B) * U * Tn))
  for (int64_t b = 0; b < B; ++b) {
    const int64_t Ub = grid.U_of(b), Tb = grid.T_of(b);
    for (int64_t i = 0; i < U; ++i) {
      const int64_t off = (b * U + i) * Tn;
      const int64_t n = i < Ub ? Tb : 0;
      if (n > 0) softmax_row(e + off, n, w + off);
      std::fill(w + off + n, w + off + Tn, T(0));
    }
  }
}

template <class T>
void softmax_backward(const T* grad_w, const T* w, T* grad_e, const Grid& grid) {
  const char* kName = "softmax_backward";
  grid.validate(kName);
  if (grid.numel() > 0) {
    detail::check_ptr(grad_w, kName, "grad_w");
    detail::check_ptr(w, kName, "w");
    detail::check_ptr(grad_e, kName, "grad_e");
  }
  detail::check_finite(kName, "grad_w", grad_w, grid);
  detail::check_nonnegative(kName, "w", w, grid);  // the forward's output, a distribution
  const int64_t B = grid.batch, U = grid.out_len, Tn = grid.in_len;
#pragma omp parallel for schedule(static) if (detail::worth_parallel(B, double(B) * U * Tn))
  for (int64_t b = 0; b < B; ++b) {
    const int64_t Ub = grid.U_of(b), Tb = grid.T_of(b);
    for (int64_t i = 0; i < U; ++i) {
      const int64_t off = (b * U + i) * Tn;
      const int64_t n = i < Ub ? Tb : 0;
      T dot = 0;
      for (int64_t j = 0; j < n; ++j) dot += grad_w[off + j] * w[off + j];
      for (int64_t j = 0; j < n; ++j) grad_e[off + j] = w[off + j] * (grad_w[off + j] - dot);
      std::fill(grad_e + off + n, grad_e + off + Tn, T(0));
    }
  }
}

template <class T>
void chunk_softmax(const T* u, int64_t begin, int64_t end, T* weights) {
  const char* kName = "chunk_softmax";
  detail::check_ptr(u, kName, "u");
  detail::check_ptr(weights, kName, "weights");
  mona::detail::check(begin >= 0 && begin <= end, kName,
                      ": expected 0 <= begin <= end, got begin = ", begin, ", end = ", end);
  for (int64_t j = begin; j <= end; ++j) {
    mona::detail::check(std::isfinite(u[j]), kName, ": u: expected finite energies, got ",
                        static_cast<double>(u[j]), " at index ", j);
  }
  softmax_row(u + begin, end - begin + 1, weights);
}

#define MONA_INSTANTIATE(T)                                                     \
  template void softmax<T>(const T*, T*, const Grid&);                          \
  template void softmax_backward<T>(const T*, const T*, T*, const Grid&);       \
  template void chunk_softmax<T>(const T*, int64_t, int64_t, T*);
MONA_INSTANTIATE(float)
MONA_INSTANTIATE(double)
#undef MONA_INSTANTIATE

}  // namespace mona::core
