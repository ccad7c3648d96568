// MoChA chunkwise attention in expectation (000 eq. 17): see include/mona/core/mocha.h
// for the formulas and docs/math/mocha.md for the derivation of the numerics and of the
// backward pass.
#include "mona/core/mocha.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "parallel.h"
#include "subnormals.h"
#include "targets.h"
#include "validate.h"
#include "vexp.h"

// The kernels, compiled once per target (targets.h).
#define MONA_TARGET_KERNELS "mocha_kernels.inc"
#include "each_target.h"
#undef MONA_TARGET_KERNELS

namespace mona::core {

// The public entry points: each runs the kernel of the target chosen at the first call.

template <class T>
void mocha_chunkwise(const T* alpha, const T* u, T* beta, const Grid& grid, int64_t w) {
  MONA_TARGET_DISPATCH(mocha_chunkwise<T>, alpha, u, beta, grid, w);
}

template <class T>
void mocha_chunkwise_backward(const T* grad_beta, const T* alpha, const T* u, T* grad_alpha,
                              T* grad_u, const Grid& grid, int64_t w) {
  MONA_TARGET_DISPATCH(mocha_chunkwise_backward<T>, grad_beta, alpha, u, grad_alpha, grad_u,
                       grid, w);
}

MONA_INSTANTIATE(float)
MONA_INSTANTIATE(double)

}  // namespace mona::core
