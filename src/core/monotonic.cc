// Expected alignment of hard monotonic attention (002 eqs. 13-14): see
// include/mona/core/monotonic.h for the recurrences and docs/math.md section 2 for the
// derivation of the backward pass.
#include "mona/core/monotonic.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>  // the AVX-512 float widening in monotonic_kernels.inc
#endif

#include "parallel.h"
#include "subnormals.h"
#include "targets.h"
#include "validate.h"

// The kernels, compiled once per target (targets.h).
#define MONA_TARGET_KERNELS "monotonic_kernels.inc"
#include "each_target.h"
#undef MONA_TARGET_KERNELS

namespace mona::core {

// The public entry points: each runs the kernel of the target chosen at the first call.

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
