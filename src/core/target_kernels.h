// Internal: the kernels compiled once per target (targets.h), declared in the namespace
// mona::core::MONA_DECLARE_TARGET. The entry points include this file once for each target
// other than their own compilation's, so it has no include guard. The signatures are those
// of the public headers (mona/core/monotonic.h, mocha.h, matcha.h).
#include <cstdint>

#include "mona/core/grid.h"

namespace mona::core::MONA_DECLARE_TARGET {

template <class T>
void monotonic_alignment(const T* p, const Opt<T>* alpha0, T* alpha, const Grid& grid);
template <class T>
void monotonic_alignment_backward(const T* grad_alpha, const T* p, const Opt<T>* alpha0,
                                  const T* alpha, T* grad_p, Opt<T>* grad_alpha0,
                                  const Grid& grid);
template <class T>
void monotonic_alignment_step(const T* p, const T* alpha_prev, T* alpha, int64_t batch,
                              int64_t in_len, const int64_t* in_lens);
template <class T>
void monotonic_alignment_step_backward(const T* grad_alpha, const T* p, const T* alpha_prev,
                                       T* grad_p, T* grad_alpha_prev, int64_t batch,
                                       int64_t in_len, const int64_t* in_lens);

template <class T>
void mocha_chunkwise(const T* alpha, const T* u, T* beta, const Grid& grid, int64_t w);
template <class T>
void mocha_chunkwise_backward(const T* grad_beta, const T* alpha, const T* u, T* grad_alpha,
                              T* grad_u, const Grid& grid, int64_t w);

template <class T>
void matcha_chunkwise(const T* alpha_prev, const T* p, const T* u, T* beta, const Grid& grid);
template <class T>
void matcha_chunkwise_backward(const T* grad_beta, const T* alpha_prev, const T* p,
                               const T* u, const T* beta, T* grad_alpha_prev, T* grad_p,
                               T* grad_u, const Grid& grid);

}  // namespace mona::core::MONA_DECLARE_TARGET
