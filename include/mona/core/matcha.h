// mona/core/matcha.h: expected attention of MAtChA (monotonic adaptive chunkwise attention,
// 000 App. C), forward and analytic backward in O(T^2) time and O(T) extra memory per row
// (the cumsum/cumprod formulation of 000 eqs. 40-43 needs O(U T^2) memory). Derivation
// of every statement below: docs/math/matcha.md.
//
// At test time MAtChA attends softly to the whole chunk between the previous and the
// current hard monotonic choice, [t_{i-1}, t_i] (000 eq. 27; mona::core::chunk_softmax).
// Training in expectation sums over both ends of the chunk (000 eq. 28). For one valid
// row (0-based, n = in_lens[b], a = alpha_prev[b, i, :], p = p[b, i, :], u = u[b, i, :]):
//
//   beta[j] = sum_{k <= j <= l < n} W(k, l) * exp(u[j]) / S(k, l)
//   W(k, l) = a[k] * p[l] * Pi(k, l)          probability that the chunk is [k, l]
//   Pi(k, l) = prod_{o=k}^{l-1} (1 - p[o])    (Pi(k, k) = 1)
//   S(k, l) = sum_{m=k}^{l} exp(u[m])
//
// It is evaluated for each chunk end l by two O(l) sweeps, never forming exp(u) itself:
//
//   down, k = l .. 0:  M(k, l) = max u[k..l]
//                      s(k, l) = S(k, l) * exp(-M(k, l))       in [1, l - k + 1]
//                      E(k, l) = exp(u[k] - M(k, l))           in (0, 1]
//                      x(k, l) = a[k] * Pi(k, l) / s(k, l)
//   up,   j = 0 .. l:  Q(j) = Q(j-1) * exp(M(j, l) - M(j-1, l)) + x(j, l)   (Q(-1) = 0)
//                      beta[j] += p[l] * E(j, l) * Q(j)
//
// Every exp has a non-positive argument (M(j-1, l) >= M(j, l)) and every factor is bounded,
// so the result is finite for any finite energies (1e4 and -1e4 included) and any p in
// [0, 1]. Rows of beta need not sum to 1: sum_j beta[i, j] = sum_j alpha[i, j] of
// monotonic attention, the probability that step i stops somewhere (002 sec. 2.3).
//
// Backward, with g = dL/dbeta (one row) and G(k, l) = sum_{j=k}^{l} g[j] exp(u[j]) / S(k, l)
// (the chunk softmax average of g, so L = sum_{k<=l} W(k, l) G(k, l)):
//
//   dL/da[k] = sum_{l >= k} p[l] * Pi(k, l) * G(k, l)
//   dL/dp[m] = D_m(m) - sum_{l > m} p[l] * Pi(m+1, l) * D_l(m)
//              D_l(m) = sum_{k <= m} a[k] * Pi(k, m) * G(k, l)
//                     = (1 - p[m-1]) * D_l(m-1) + a[m] * G(m, l)        (no division by 1 - p)
//   dL/du[m] = g[m] * beta[m] - exp(u[m]) * sum_{k <= m <= l} W(k, l) * G(k, l) / S(k, l)
//
// G(k, l) is accumulated in the same downward sweep (as a rescaled running sum divided by
// s), and the last sum of dL/du is the forward sweep with x(k, l) replaced by
// x(k, l) * G(k, l). The backward uses the saved forward output beta for g[m] * beta[m].
//
// Shapes ([B, U, T] notation, lengths and padding as in mona/core/grid.h):
//   alpha_prev, p, u, beta, grad_beta, grad_alpha_prev, grad_p, grad_u:   [B, U, T]
// Row i of alpha_prev is the monotonic alignment of the previous output step, alpha_{i-1}
// (the caller builds it, e.g. with monotonic_alignment; row 0 holds the initial alignment).
// A one-step call for an RNN decoder is U = 1. Valid region per b: rows i < out_lens[b],
// entries j < in_lens[b]; padding is never read and is written exactly 0. A row of length
// 0 is all zero (never NaN). Outputs may not alias inputs.
//
// Errors (mona::Error, message names the kernel, the argument, the value and its index):
//   null pointers (when the grid is non-empty); negative sizes; lengths outside [0, T] /
//   [0, U]; p outside [0, 1] or NaN; u non-finite; alpha_prev negative or non-finite;
//   grad_beta non-finite; beta (backward input) negative or non-finite.
//
// Threads: rows (b, i) are independent given alpha_prev and are processed in parallel with
// OpenMP (all B * U rows, not only the batch) once rows * T^2 exceeds 2^18; smaller calls
// run on the calling thread. Each thread allocates its O(T) scratch once per call, never
// inside the loops.
// Cost per valid row of length n: one exp per (k, l) pair in either direction, at most
// n^2 / 2 pairs. The chunk ends l are independent, so a row sweeps as many of them at once
// as the kernel target's vectors hold lanes (8 to 16 with AVX-512), each lane one chunk end
// through the sweeps above, with the exps computed in the vectors (src/core/vexp_lanes.inc):
// 5.2-5.8x the one-end-at-a-time form at [32, 100, 500] and [8, 50, 2000] in float
// (bench/notes.md). The lanes' shares of each output entry are added in a fixed order. A downward sweep stops where Pi(k, l) is 0 (p = 1, or the product below the
// smallest normal number and flushed, src/core/subnormals.h; the backward pass where Pi
// without its smallest factor is), for all the lanes' chunk ends: the chunks further down
// carry no weight the type can hold while alpha_prev <= 1, as an alignment's entries are.
// (A larger alpha_prev, which the kernels accept, can lose such weights: alpha_prev = 1e30
// in float drops entries of about 1e-14 that its products would still reach.) In float that is a few hundred entries for typical p, so long rows cost O(n) per
// chunk end times that span, not O(n^2) (3.4-3.7x at [8, 50, 2000], bench/notes.md).
#pragma once

#include <cstdint>

#include "mona/core/grid.h"

namespace mona::core {

/// MAtChA expected attention (000 eq. 28): (alpha_prev, p, u) [B, U, T] -> beta [B, U, T].
/// `alpha_prev[b, i, :]` is alpha_{i-1}; `p` the stopping probabilities and `u` the chunk
/// energies of step i. `beta` may not alias any input.
template <class T>
void matcha_chunkwise(const T* alpha_prev, const T* p, const T* u, T* beta, const Grid& grid);

/// Backward of matcha_chunkwise. Inputs: grad_beta = dL/dbeta, the forward inputs and the
/// forward output beta. Outputs: grad_alpha_prev, grad_p, grad_u, all [B, U, T] and
/// required (none may alias an input or another output).
template <class T>
void matcha_chunkwise_backward(const T* grad_beta, const T* alpha_prev, const T* p,
                               const T* u, const T* beta, T* grad_alpha_prev, T* grad_p,
                               T* grad_u, const Grid& grid);

}  // namespace mona::core
