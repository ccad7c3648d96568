// mona/core/mocha.h: MoChA's chunkwise attention in expectation, forward and backward
// (000 eqs. 14-19 and 24-25; derivation of the numerics and of the backward pass in
// docs/math/mocha.md).
//
// At test time MoChA stops at memory entry t (hard monotonic attention) and takes a soft
// attention over the chunk of w entries ending there (000 eqs. 14-16, 0-based):
//
//   chunk(t) = [mocha_chunk_start(t, w), t],   mocha_chunk_start(t, w) = max(0, t - w + 1)
//   weights  = chunk_softmax(u, mocha_chunk_start(t, w), t, weights)   (mona/core/softmax.h)
//
// The chunk is truncated at the start of the memory, as in the paper's sums. For training,
// the stopping point is distributed as alpha[i, k] = P(t_i = k) (mona/core/monotonic.h),
// and the expected attention over memory entries is (000 eq. 17, 0-based, per row):
//
//   Z[k]    = logsumexp(u[max(0, k-w+1) .. k])                          k = 0 .. T_b - 1
//   s(k, j) = exp(u[j] - Z[k])            softmax weight of j in the chunk ending at k
//   beta[j] = sum_{k = j}^{min(j+w-1, T_b-1)} alpha[k] * s(k, j)          j = 0 .. T_b - 1
//
// Numerics: Z[k] is never formed. Each chunk keeps its max m[k] = max u[chunk(k)] and
// S[k] = sum_{l in chunk(k)} exp(u[l] - m[k]) in [1, w], and s(k, j) is evaluated as
// exp(u[j] - m[k]) / S[k]: every exponent is <= 0 and no exp(u) appears on its own, so
// energies of any finite magnitude (+-1e4 and beyond) give finite results. This replaces
// the cumulative form of 000 eqs. 19/25, whose exp(u) overflows and whose division by a
// moving sum of exp(u) underflows to 0/0. A chunk of one entry has m[k] = u[k], S[k] = 1
// and s(k, k) = 1 exactly, so w = 1 returns alpha bit for bit (hard monotonic attention,
// 000 sec. 2.4). Rows need not sum to 1; sum_j beta[j] = sum_k alpha[k] (mass is moved
// within each chunk, never created or lost).
//
// Backward (g = dL/dbeta; the softmax Jacobian ds(k, j)/du[m] = s(k, j) (delta_jm -
// s(k, m)) for j, m in chunk(k)):
//
//   dL/dalpha[k] = sum_{j = max(0, k-w+1)}^{k} g[j] * s(k, j)
//                  (the chunk-k softmax average of g; below written ga[k])
//   dL/du[m]     = sum_{k = m}^{min(m+w-1, T_b-1)} alpha[k] * s(k, m) * (g[m] - ga[k])
//
// m[k] and S[k] are recomputed from u, so the backward pass needs no saved state.
//
// Shapes ([B, U, T] notation, see mona/core/grid.h for lengths and padding):
//   alpha, u, beta, grad_beta, grad_alpha, grad_u:   [B, U, T]
// Valid region per b: rows i < out_lens[b], entries j < in_lens[b]; every row is
// independent. Padding is never read and is written exactly 0. A batch element with
// in_lens[b] = 0 or out_lens[b] = 0 gets all zeros (never NaN). Outputs may not alias
// inputs or each other.
//
// Cost: O(T_b * min(w, T_b)) time per row (one exp per (chunk, entry) pair, evaluated in
// SIMD by elementwise loops over the row, fused into one loop per quantity for w = 2, 4, 8,
// docs/math/mocha.md 2.4); (w + 2) T scratch values per thread, allocated once per call.
//
// Errors (mona::Error, message names the kernel, the argument and the value found):
//   w < 1; null pointers for required arguments (when the grid is non-empty); negative
//   sizes; lengths outside [0, T] / [0, U]; u non-finite, alpha negative or non-finite,
//   grad_beta non-finite in the valid region. The values are checked row by row as the
//   kernels read them, so when they throw for one of those the outputs hold unspecified
//   values.
//
// Threads: batch elements are processed in parallel with OpenMP (heads should be folded
// into the batch dimension).
#pragma once

#include <cstdint>

#include "mona/core/grid.h"

namespace mona::core {

/// First memory index of the hard-time chunk ending at t: max(0, t - w + 1) (000 eq. 14,
/// truncated at the start of the memory). Requires t >= 0 and w >= 1.
inline int64_t mocha_chunk_start(int64_t t, int64_t w) {
  const int64_t v = t - w + 1;  // no overflow for t >= 0, w >= 1
  return v > 0 ? v : 0;
}

/// Forward: (alpha [B, U, T], u [B, U, T], chunk size w >= 1) -> beta [B, U, T]
/// (000 eq. 17). alpha is the monotonic alignment (finite, >= 0), u the chunk energies
/// (finite). A w larger than T behaves as w = T.
template <class T>
void mocha_chunkwise(const T* alpha, const T* u, T* beta, const Grid& grid, int64_t w);

/// Backward: grad_beta = dL/dbeta [B, U, T] and the forward inputs alpha, u, w ->
/// grad_alpha = dL/dalpha and grad_u = dL/du, both [B, U, T] and both required.
template <class T>
void mocha_chunkwise_backward(const T* grad_beta, const T* alpha, const T* u, T* grad_alpha,
                              T* grad_u, const Grid& grid, int64_t w);

}  // namespace mona::core
