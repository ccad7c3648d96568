// mona/core/gmm.h: GMM attention, source-aware GMM attention (SAGMM) and its truncated,
// streamable form SAGMM-tr: weights, analytic backward, the length penalty and the online
// step (003, eqs. 4-20 and Algorithm 1 of A.2; derivations in docs/math/gmm.md).
//
// Convention: `variance` is a VARIANCE everywhere in mona (sigma_i of 003 eqs. 6, 11 and
// 14, which divide by 2 sigma and take sqrt(2 pi sigma)). 003 eq. 18 writes the same
// Gaussian with a standard deviation; mona reads it with the variance like the others.
// The standard deviation is sqrt(variance).
//
// Per batch element b, output step i and mixture component (head) h, with position mu,
// variance v > 0 and mixture weight w >= 0, and per memory entry j a position nu_j and a
// scale delta_j >= 0, the kernel computes (0-based, see mona/core/grid.h):
//
//   N(x; mu, v)   = exp(-(x - mu)^2 / (2 v)) / sqrt(2 pi v)                (003, eq. 11)
//   alpha[b,i,j]  = delta_j * sum_h w[b,i,h] * M[b,i,h,j] * N(nu_j; mu[b,i,h], v[b,i,h])
//
// with the window mask M in {0, 1} chosen by GmmOptions::window:
//   kNone      M = 1                                        GMM (003, eq. 7), SAGMM (eq. 12)
//   kAdaptive  M = [mu - r sqrt(v) < nu_j < mu + r sqrt(v)]     SAGMM-tr (003, eqs. 14-15),
//              r = GmmOptions::radius (2 in the paper); both bounds strict, evaluated as
//              gmm_window_bounds() does.
//   kFixed     M = [|j - gamma| < c / 2] (c = GmmOptions::width, integers j), where
//              gamma[b,i,h] = first argmin_{j in [gamma[b,i-1,h], T_b)} |nu_j - mu[b,i,h]|
//              and gamma[b,-1,h] = 0  (003, eqs. 17-19: the argmax of the Gaussian is the
//              nearest position; ties go to the earliest entry).
//
// What the caller supplies (and what it does itself, outside these kernels):
//   * Plain GMM (003 eqs. 6-7): nu = nullptr means nu_j = j + 1 (the paper's 1-based frame
//     index) and delta = nullptr means delta_j = 1.
//   * SAGMM (003 eqs. 9-12): delta_j = sigmoid(K_j W_delta) and nu = cumsum(delta), both
//     passed in. The kernel treats nu and delta as independent inputs; the backward pass
//     returns dL/dnu and the direct dL/ddelta, and the caller adds the cumsum's backward
//     (a reverse cumulative sum of dL/dnu) to dL/ddelta.
//   * mu_i = mu_{i-1} + Delta_i (eq. 5; SAGMM clamps Delta to [0, 3]) and v = softplus(.)
//     are computed by the caller.
//   * Mixture weights w: given as they are, typically softmax_h(phi) (003 eq. 8); pass
//     nullptr for w = 1. With H > 1 the heads share nu and delta and their weights are
//     summed into one alignment (a Gaussian mixture over one memory, as in Battenberg et
//     al.'s GMM attention). 003's multi-head form gives every head its own values and its
//     own delta/nu: fold such heads into the batch with H = 1 and weight each head's
//     context by softmax_h(phi) outside the kernel.
//
// Windows are masks, not functions of the parameters to differentiate: the gradient is
// that of the formula above with M (and gamma) held fixed, which is the derivative almost
// everywhere (M jumps only where nu_j sits exactly on a window edge).
//
// Numerics: every Gaussian is evaluated as exp(-0.5 log(2 pi v) - z^2 / 2) with
// z = (x - mu) / sqrt(v), one exponent, never a ratio of two exponentials, and no square of
// a distance that could overflow where z cannot (mu = 2e154, v = 1e308). An entry 1e4
// standard deviations away gives exp(-5e7) = 0 exactly, and its gradient terms are skipped (exactly 0), so no 0 * inf =
// NaN can arise from far entries.
//
// Backward (G = dL/dalpha[b,i,j]; n = N(nu_j; mu, v) of head h; x = (nu_j - mu) / v; sums
// over the entries j with M = 1):
//
//   dL/dw[b,i,h]   = sum_j G delta_j n
//   dL/dmu[b,i,h]  = sum_j G delta_j w n x
//   dL/dv[b,i,h]   = sum_j G delta_j w n ((nu_j - mu) x - 1) / (2 v)
//   dL/dnu[b,j]    = -sum_{i,h} G delta_j w n x
//   dL/ddelta[b,j] = sum_{i,h} G w n                       (direct term only, see above)
//
// Shapes ([B, U, T] notation; H = num_heads >= 1):
//   mu, variance, weights, grad_mu, grad_variance, grad_weights:  [B, U, H]
//   nu, delta, grad_nu, grad_delta:                               [B, T]
//   alpha, grad_alpha:                                            [B, U, T]
// Valid region per b: rows i < out_lens[b], entries j < in_lens[b] (all H heads of a
// valid row are valid). Padding is never read and is written exactly 0 in every output.
// in_lens[b] = 0 or out_lens[b] = 0 gives all zeros. Outputs may not alias inputs.
//
// Errors (mona::Error naming the kernel, the argument and the value with its index):
//   num_heads < 1; invalid options; null required pointers (when the grid is non-empty);
//   negative sizes; lengths outside [0, T] / [0, U]; in the valid region: mu non-finite,
//   variance not finite and > 0, weights not finite and >= 0, nu non-finite, delta not
//   finite and >= 0, grad_alpha non-finite.
//
// Cost: O(U T H) time per batch element and O(H) scratch; batch elements run in parallel
// with OpenMP.
//
// Length penalty (003, eq. 13), per batch element, with I = out_lens[b], J = in_lens[b]
// and m = min(I, J):
//
//   L[b] = lambda * ( sum_h (mu[b, I-1, h] - m)^2 + (nu[b, J-1] - m)^2 )
//   dL/dmu[b, I-1, h] = 2 lambda (mu[b, I-1, h] - m) * grad_loss[b]
//   dL/dnu[b, J-1]    = 2 lambda (nu[b, J-1] - m) * grad_loss[b]
//
// where an empty sequence uses the initial position mu_0 = 0 (I = 0) resp. nu_0 = 0
// (J = 0); all other gradient entries are exactly 0. The paper uses lambda = 5e-4 and
// switches the penalty off after 200k training steps; the schedule is the caller's.
//
// Online step (003 sec. 2.4 and Algorithm 1 of A.2): gmm_online_step() decides, for one
// Gaussian (one head, one output step) and the frames available so far, whether the
// context can be emitted, and computes the window's weights touching only frames near the
// window. It requires nu to be nondecreasing (true for nu = cumsum(delta) with delta >= 0
// and for nu_j = j + 1), so that each window is a contiguous range of frames:
//   kAdaptive  emit as soon as an available frame has nu_j >= mu + r sqrt(v) (no later
//              frame can enter the window), or when the input is finished.
//   kFixed     emit once gamma is known (an available frame has nu_j >= mu, or the input
//              is finished) and the last frame of the window, gamma + ceil(c/2) - 1, has
//              arrived (or the input is finished): c/2 frames of lookahead (003 eq. 20).
//   kNone      plain GMM cannot stream: emit only when the input is finished.
// The emitted weights equal the offline alpha row (H = 1, w = 1) on [begin, end) and the
// offline row is 0 outside it. The cursor carries the window position from one output
// step to the next, so an utterance costs O(T + sum_i |window_i| + U) frame reads
// (GmmCursor::touched counts them), not O(U T).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "mona/core/grid.h"
#include "mona/core/scan.h"

namespace mona::core {

/// Which entries a Gaussian may attend to (see the header comment).
enum class GmmWindow {
  kNone,      ///< all entries: GMM (003 eq. 7) and SAGMM (eq. 12)
  kAdaptive,  ///< |nu_j - mu| < radius * sqrt(variance): SAGMM-tr (eqs. 14-16)
  kFixed,     ///< |j - gamma| < width / 2 around the nearest entry: eqs. 17-20
};

/// Options of the GMM kernels.
struct GmmOptions {
  GmmWindow window = GmmWindow::kNone;
  double radius = 2.0;  ///< kAdaptive: half-width in standard deviations (003 eq. 14: 2)
  int64_t width = 4;    ///< kFixed: c, the window covers entries with |j - gamma| < c / 2

  /// Throws mona::Error unless radius is finite and > 0 and width >= 1.
  void validate() const {
    detail::check(std::isfinite(radius) && radius > 0.0,
                  "GmmOptions.radius: expected a finite value > 0, got ", radius);
    detail::check(width >= 1, "GmmOptions.width: expected a window width (c, 003 eq. 18) >= 1, got ", width);
  }
  /// E.g. "GmmOptions(window=adaptive, radius=2)".
  std::string ToString() const;
};

/// Window bounds of kAdaptive: (lo, hi) = (mu - r sqrt(v), mu + r sqrt(v)); an entry is
/// in the window iff lo < nu_j < hi. The one place the bounds are computed.
template <class T>
inline void gmm_window_bounds(T mu, T variance, double radius, T* lo, T* hi) {
  const T half = static_cast<T>(radius) * std::sqrt(variance);
  *lo = mu - half;
  *hi = mu + half;
}

/// Largest |j - gamma| inside a fixed window of width c: floor((c - 1) / 2).
inline int64_t gmm_fixed_half_width(int64_t width) { return (width - 1) / 2; }

/// Forward: alpha [B, U, T] (see the header comment). weights, nu and delta may be null
/// (w = 1, nu_j = j + 1, delta_j = 1).
template <class T>
void gmm_attention(const T* mu, const T* variance, const Opt<T>* weights, const Opt<T>* nu,
                   const Opt<T>* delta, T* alpha, int64_t num_heads, const Grid& grid,
                   const GmmOptions& options = {});

/// Backward: grad_alpha = dL/dalpha [B, U, T] and the forward inputs -> gradients. Every
/// output may be null (not computed); grad_nu / grad_delta may be requested even when nu /
/// delta were null (the gradient at the default values).
template <class T>
void gmm_attention_backward(const T* grad_alpha, const T* mu, const T* variance,
                            const Opt<T>* weights, const Opt<T>* nu, const Opt<T>* delta,
                            Opt<T>* grad_mu, Opt<T>* grad_variance, Opt<T>* grad_weights,
                            Opt<T>* grad_nu, Opt<T>* grad_delta, int64_t num_heads,
                            const Grid& grid, const GmmOptions& options = {});

/// Length penalty (003 eq. 13): mu [B, U, H], nu [B, T] (null: nu_j = j + 1) -> loss [B].
/// lambda must be finite and >= 0.
template <class T>
void gmm_length_penalty(const T* mu, const Opt<T>* nu, T* loss, int64_t num_heads,
                        const Grid& grid, double lambda);

/// Backward of the length penalty: grad_loss [B] -> grad_mu [B, U, H], grad_nu [B, T]
/// (either may be null).
template <class T>
void gmm_length_penalty_backward(const T* grad_loss, const T* mu, const Opt<T>* nu,
                                 Opt<T>* grad_mu, Opt<T>* grad_nu, int64_t num_heads,
                                 const Grid& grid, double lambda);

/// Where the online attention of one stream and one head stands. Start each utterance
/// with a default-constructed (or reset()) cursor.
struct GmmCursor {
  int64_t begin = 0;     ///< first frame of the last window (kAdaptive search start)
  int64_t gamma = 0;     ///< kFixed: gamma of the last emitted step (gamma_{-1} = 0)
  int64_t next = 0;      ///< first frame not yet examined by the pending step
  int64_t best = -1;     ///< kFixed: nearest frame found so far by the pending step
  bool pending = false;  ///< a step returned kNeedMoreInput and waits for frames
  bool located = false;  ///< kFixed: the pending step knows its gamma
  double mu = 0.0, variance = 0.0;  ///< parameters of the pending step (checked on resume)
  int64_t touched = 0;   ///< frames read (nu or weight) over the whole utterance
  void reset() { *this = GmmCursor(); }
};

/// Result of gmm_online_step.
struct GmmStepResult {
  /// kChose: the window [begin, end) is complete and the weights are valid (the step chose
  /// its entries); kNeedMoreInput: call again with the same mu / variance after more frames
  /// arrive. (kExhausted does not occur: a finished input always completes the window.)
  ScanStatus status = ScanStatus::kNeedMoreInput;
  int64_t begin = 0;    ///< first frame of the window (when emitted)
  int64_t end = 0;      ///< one past its last frame (begin == end: empty window, zero context)
  int64_t gamma = -1;   ///< kFixed: the window's centre (when emitted)
  int64_t touched = 0;  ///< frames read by this call
};

/// One online step for one Gaussian: mu, variance (> 0) of the current output step, nu
/// [available] (nondecreasing) and delta [available] (null: 1) of the frames so far.
/// On kChose writes weights[k] = delta_j N(nu_j; mu, variance) for j = begin + k,
/// k < end - begin (`weights` must hold `available` values) and advances the cursor to
/// the next output step. On kNeedMoreInput writes nothing; call again with the same mu
/// and variance and at least as many frames. Throws mona::Error for a non-finite mu, a
/// non-positive variance, a non-finite or decreasing nu among the frames it reads, a
/// negative or non-finite delta among the frames it weighs, fewer frames than last time,
/// or different mu / variance while a step is pending; the cursor is then as it was before
/// the call (the weights may have been written in part).
template <class T>
GmmStepResult gmm_online_step(T mu, T variance, const T* nu, const Opt<T>* delta,
                              int64_t available, bool input_finished,
                              const GmmOptions& options, GmmCursor& cursor, T* weights);

}  // namespace mona::core
