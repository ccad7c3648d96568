// mona/core/additive_energy.h: the additive energy of a batch of queries against the keys
// of a memory, forward and backward, each one pass (002 eqs. 15-16, 000 eq. 5).
//
// With the query's part q = W_s s + b and the keys k_j = W_h h_j computed by the caller
// (two matrix products: LibTorch's), the energy computed here is
//
//   e[b, i, j] = sum_k w[k] tanh(q[b, i, k] + keys[b, j, k])
//
// where w is v (002 eq. 15) or g v / ||v|| (002 eq. 16; the caller forms it, and adds the
// offset r). Backward, with h = tanh(q + keys) recomputed and G = dL/de:
//
//   dL/dq[b, i, k]    = sum_j G[b, i, j] w[k] (1 - h[b, i, j, k]^2)
//   dL/dkeys[b, j, k] = sum_i G[b, i, j] w[k] (1 - h[b, i, j, k]^2)
//   dL/dw[k]          = sum_{b, i, j} G[b, i, j] h[b, i, j, k]
//
// A LibTorch formulation (add, tanh, matrix-vector product, and as many autograd nodes)
// writes and reads the [B, U, T, d] tensor h several times in each direction and keeps it
// for the backward pass; here it lives one row of d values at a time, in the cache.
//
// tanh(x) is computed as sign(x) (1 - e) / (1 + e) with e = exp(-2 |x|) (src/core/vexp.h,
// a polynomial that the loops vectorise): its absolute error is a few units in the last
// place of 1 (float 6e-8, double 1.1e-16) for every x, so an energy's error is at most a
// few ulp times sum_k |w[k]|; its relative error near x = 0 is larger than libm's.
//
// Shapes (row-major, contiguous): query [B, U, d], keys [B, T, d], w [d], e and grad_e
// [B, U, T]; grad_query like query, grad_keys like keys, grad_w like w. Every entry of a
// row is scored (no lengths: a mechanism masks the padding entries' energies after). The
// backward pass skips (b, i, j) where G is exactly 0, such as padding.
//
// Errors (mona::Error): negative sizes; null pointers where there are entries. The values
// are not checked: a NaN in a query or key gives a NaN energy, which the mechanisms'
// kernels reject by name (p, u); an infinite one saturates tanh (as torch.tanh does) and
// gives a finite energy.
//
// Threads: batch elements in parallel with OpenMP when the call is large enough
// (src/core/parallel.h); dL/dw is summed per thread, then over the threads in a fixed
// order. Each call allocates one row of d values per thread (and [threads, d] partial
// sums of dL/dw in the backward pass).
#pragma once

#include <cstdint>

namespace mona::core {

/// Forward: e [B, U, T] = sum_k w[k] tanh(query[b, i, k] + keys[b, j, k]).
template <class T>
void additive_energy(const T* query, const T* keys, const T* w, T* e, int64_t batch, int64_t out_len,
                     int64_t in_len, int64_t dim);

/// Backward: grad_e [B, U, T] -> grad_query [B, U, d], grad_keys [B, T, d], grad_w [d]
/// (each overwritten; pass nullptr for one that is not needed).
template <class T>
void additive_energy_backward(const T* grad_e, const T* query, const T* keys, const T* w, T* grad_query,
                              T* grad_keys, T* grad_w, int64_t batch, int64_t out_len, int64_t in_len,
                              int64_t dim);

}  // namespace mona::core
