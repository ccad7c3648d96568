// mona/core/monotonic.h: expected alignment of hard monotonic attention, forward and
// backward (002, eqs. 9-14; derivation of the backward pass in docs/math.md, section 2).
//
// Training in expectation replaces the discrete choice t_i of the hard monotonic process
// (002 section 2.2) by its distribution alpha[i, j] = P(t_i = j). With p[i, j] the
// probability of stopping at memory entry j at output step i (002 eq. 7), the recurrence
// computed here is (002 eqs. 13-14, 0-based):
//
//   q[i, 0] = alpha[i-1, 0]
//   q[i, j] = (1 - p[i, j-1]) * q[i, j-1] + alpha[i-1, j]          j = 1 .. T_b - 1
//   alpha[i, j] = p[i, j] * q[i, j]
//
// with alpha[-1, :] the initial alignment alpha_0 (default delta at j = 0, i.e. t_0 = 1
// in the paper's 1-based indexing). Every coefficient lies in [0, 1], so the recurrence is
// stable for any T: no cancellation and nothing that overflows, and its rounding error grows
// at most like T eps (double: tens to hundreds of ulps at T = 500-5000; float inputs are
// carried in double and come out within about an ulp). It replaces the cumsum/cumprod closed form (002 eq. 30,
// 000 eq. 23), whose clamped division by an exclusive cumprod underflows on long inputs.
//
// Rows need not sum to 1: sum_j alpha[i, j] <= 1, and the missing mass is the probability
// that the process scanned the whole memory without stopping (context = 0, 002 sec. 2.3).
//
// Backward (reverse scan of the same recurrence; gq[i, j] = dL/dq[i, j]):
//
//   gq[i, T_b] = 0
//   gq[i, j]   = G[i, j] * p[i, j] + (1 - p[i, j]) * gq[i, j+1]     j = T_b - 1 .. 0
//   dL/dp[i, j]          = q[i, j] * (G[i, j] - gq[i, j+1])
//   dL/dalpha[i-1, j]    = gq[i, j]
//
// where G[i, j] = dL/dalpha[i, j] is the total gradient reaching alpha[i, j]: the caller's
// grad_alpha plus, in the full grid, gq[i+1, j] from the row below. q is recomputed from
// the saved alpha, so the backward pass needs no saved intermediate state. The full-grid
// kernels compute gq[i, j] as gq[i, j+1] + p[i, j] * (G[i, j] - gq[i, j+1]), the same value
// with the difference that dL/dp takes too.
//
// Shapes ([B, U, T] notation, see mona/core/grid.h for lengths and padding):
//   p, alpha, grad_alpha, grad_p:   [B, U, T]   (full grid)   or [B, T] (one step)
//   alpha0 / alpha_prev, grads:     [B, T]
// Valid region per b: rows i < out_lens[b], entries j < in_lens[b]. Padding is written 0.
// A batch element with in_lens[b] = 0 gets an all-zero alignment (never NaN).
//
// Errors (mona::Error, message names the argument and the value found):
//   null pointers for required arguments; negative sizes; lengths outside [0, T] / [0, U];
//   p outside [0, 1] or NaN in the valid region; alpha0 / alpha_prev, and the backward
//   pass's saved alpha, negative or non-finite in the valid region; grad_alpha non-finite.
//   The full-grid kernels check p, grad_alpha and alpha as they read them, so when they
//   throw for one of those the outputs hold unspecified values.
//
// Layout of the work: the full-grid kernels run 2, 4 or 8 batch elements at once, one per
// lane of the widest vector of doubles the CPU has (float inputs are carried in double),
// grouped by input length; a group runs to its longest row without reading padding. They
// flush subnormal numbers to zero, inputs and results (src/core/subnormals.h: a subnormal
// operand costs about 100 cycles): a p below the smallest normal number is read as 0, and
// values and gradients below it come out 0, where the step kernels keep them. The two
// forms then differ by less than the smallest normal number.
//
// Threads: groups of batch elements are processed in parallel with OpenMP (heads should be
// folded into the batch dimension). Where the batch has fewer groups than there are threads
// (e.g. B = 8 on two threads with AVX-512), each group's rows are cut along the entries
// among threads / groups threads, which hand the recurrences' carries (q rightwards, gq
// leftwards) across the cuts row by row; the backward pass's q sweep runs rows ahead of its
// gq sweep so that no thread waits. Rows shorter than 2 x 128 entries are not cut (narrower
// lane groups instead). Every thread count gives the same bits. No allocation happens in
// the loops; each full-grid call allocates its per-thread rows (a few [T] vectors), two
// [U] rows of carries per cut, and, in the backward pass when grad_alpha0 is null, one
// [B, T] buffer.
#pragma once

#include <cstdint>

#include "mona/core/grid.h"

namespace mona::core {

/// Full grid forward: p [B, U, T] -> alpha [B, U, T] (002 eqs. 13-14).
/// `alpha0` [B, T] is the initial alignment alpha_{-1}; pass nullptr for the default
/// delta at j = 0 (002 sec. 2.2: t_0 = 1). `alpha` may not alias `p`.
template <class T>
void monotonic_alignment(const T* p, const Opt<T>* alpha0, T* alpha, const Grid& grid);

/// Full grid backward. Inputs: grad_alpha = dL/dalpha [B, U, T], the forward inputs p and
/// alpha0 (nullptr if the default was used) and the forward output alpha.
/// Outputs: grad_p [B, U, T] and grad_alpha0 [B, T] (may be nullptr when not needed).
template <class T>
void monotonic_alignment_backward(const T* grad_alpha, const T* p, const Opt<T>* alpha0,
                                  const T* alpha, T* grad_p, Opt<T>* grad_alpha0,
                                  const Grid& grid);

/// One output step, for RNN decoders: (p_i [B, T], alpha_{i-1} [B, T]) -> alpha_i [B, T]
/// (002 eqs. 13-14 for a single i). `alpha_prev` is required (use the delta at j = 0 for
/// the first step). `alpha` may alias `alpha_prev` (computed in place).
template <class T>
void monotonic_alignment_step(const T* p, const T* alpha_prev, T* alpha, int64_t batch,
                              int64_t in_len, const int64_t* in_lens);

/// Backward of one step: grad_alpha [B, T] -> grad_p [B, T], grad_alpha_prev [B, T].
/// `grad_alpha_prev` may alias `grad_alpha`.
template <class T>
void monotonic_alignment_step_backward(const T* grad_alpha, const T* p, const T* alpha_prev,
                                       T* grad_p, T* grad_alpha_prev, int64_t batch,
                                       int64_t in_len, const int64_t* in_lens);

}  // namespace mona::core
