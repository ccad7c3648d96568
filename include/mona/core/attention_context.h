// mona/core/attention_context.h: the context vectors of attention, forward and backward, each
// one pass over the memory (002 eq. 3, 000 eq. 26):
//
//   c[b, i, :] = sum_j w[b, i, j] h[b, j, :]
//
// where w is whatever weights a mechanism computed for output step i (soft attention's
// softmax, the expected alignment alpha, MoChA's and MAtChA's beta, GMM weights) and h the
// memory's values. Backward, with G = dL/dc:
//
//   dL/dw[b, i, j]    = <G[b, i, :], h[b, j, :]>
//   dL/dh[b, j, :]    = sum_i w[b, i, j] G[b, i, :]
//
// This is a batched matrix product, [U, T] x [T, d] per batch element. It is here because
// of the shape an RNN decoder's training step gives it, U = 1 at every output step: ATen's
// CPU bmm computes such a batch as one matrix product per batch element (B small products
// and their tensor views, and as many again for each gradient), which cost more than the
// arithmetic itself at the sizes of a training step. Here each direction is one loop over
// the batch. For U > 1 (a whole output sequence) a BLAS product is faster: use bmm there.
//
// Entries whose weight is exactly 0 (padding, the far side of a monotonic alignment) are
// skipped in the forward pass and in dL/dh, so a padding value is never read by them and a
// non-finite value there does not reach c; dL/dw is computed for every entry.
// Sums over j (forward) and over i (dL/dh) run in increasing order; dL/dw is a dot product
// with several vector accumulators per kernel target (mona/core/cpu.h), so results depend on
// the inputs and the kernel target only.
//
// Shapes (row-major, contiguous): w and grad_w [B, U, T], h and grad_h [B, T, d], c and grad_c
// [B, U, d]. Outputs may not alias inputs.
//
// Errors (mona::Error): negative sizes; null pointers where there are entries. The values
// are not checked (the mechanisms' kernels check their weights' inputs by name).
//
// Threads: batch elements in parallel with OpenMP when the call is large enough
// (src/core/parallel.h); nothing is allocated.
#pragma once

#include <cstdint>

namespace mona::core {

/// Forward: c [B, U, d] = sum_j w[b, i, j] h[b, j, :].
template <class T>
void attention_context(const T* w, const T* h, T* c, int64_t batch, int64_t out_len, int64_t in_len, int64_t dim);

/// Backward: grad_c [B, U, d] -> grad_w [B, U, T], grad_h [B, T, d] (each overwritten; pass
/// nullptr for one that is not needed).
template <class T>
void attention_context_backward(const T* grad_c, const T* w, const T* h, T* grad_w, T* grad_h, int64_t batch,
                                int64_t out_len, int64_t in_len, int64_t dim);

}  // namespace mona::core
