// MAtChA expected attention (000 App. C, eq. 28) and its backward: see
// include/mona/core/matcha.h for the sweeps and docs/math/matcha.md for the derivation.
#include "mona/core/matcha.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "subnormals.h"
#include "targets.h"
#include "validate.h"
#include "vexp.h"  // the exp constants vexp_lanes.inc reads (inside the targets' namespaces)

// The kernels, compiled once per target (targets.h).
#define MONA_TARGET_KERNELS "matcha_kernels.inc"
#include "each_target.h"
#undef MONA_TARGET_KERNELS

namespace mona::core {

// The public entry points: each runs the kernel of the target chosen at the first call.

template <class T>
void matcha_chunkwise(const T* alpha_prev, const T* p, const T* u, T* beta, const Grid& grid) {
  MONA_TARGET_DISPATCH(matcha_chunkwise<T>, alpha_prev, p, u, beta, grid);
}

template <class T>
void matcha_chunkwise_backward(const T* grad_beta, const T* alpha_prev, const T* p,
                               const T* u, const T* beta, T* grad_alpha_prev, T* grad_p,
                               T* grad_u, const Grid& grid) {
  MONA_TARGET_DISPATCH(matcha_chunkwise_backward<T>, grad_beta, alpha_prev, p, u, beta,
                       grad_alpha_prev, grad_p, grad_u, grid);
}

MONA_INSTANTIATE(float)
MONA_INSTANTIATE(double)

}  // namespace mona::core
