// mona/nn/functional.h: differentiable LibTorch functions over the core kernels.
//
// Each function checks its tensor arguments once (rank, sizes, dtype float32/float64,
// device, lengths), makes them contiguous, hands raw pointers to the kernel in
// mona/core, and records an autograd node whose backward is the kernel's analytic
// backward. Errors are mona::ArgumentError naming the argument and the values found;
// value errors found by a kernel (e.g. p outside [0, 1]) arrive as mona::Error. The
// backward passes are first order: differentiating through one (create_graph=True) throws
// c10::NotImplementedError naming the function, instead of dropping the second-order terms.
//
// Conventions: batch first; [B, U, T] = [batch, out_len, in_len]. Lengths are optional
// int64 CPU tensors [B] (`in_lens` <= T, `out_lens` <= U); an undefined tensor means full
// length. Entries past a length are exactly zero in outputs and receive zero gradient.
// Only CPU tensors are accepted: a tensor on another device is refused with its device
// named (no silent copy).
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <tuple>

namespace mona::nn {

/// Expected alignment of hard monotonic attention over a whole output sequence (002 eqs.
/// 13-14): p [B, U, T] in [0, 1] -> alpha [B, U, T]. alpha0 [B, T] is the initial
/// alignment (undefined: all mass on entry 0). Differentiable in p and alpha0.
at::Tensor monotonic_alignment(const at::Tensor& p, const at::Tensor& in_lens = {},
                               const at::Tensor& out_lens = {}, const at::Tensor& alpha0 = {});

/// One output step (RNN decoders): p_i [B, T], alpha_{i-1} [B, T] -> alpha_i [B, T].
/// Differentiable in p and alpha_prev.
at::Tensor monotonic_alignment_step(const at::Tensor& p, const at::Tensor& alpha_prev,
                                    const at::Tensor& in_lens = {});

/// MoChA expected chunkwise attention (000 eq. 17 / 25): alpha [B, U, T] and chunk
/// energies u [B, U, T] -> beta [B, U, T], chunk size w >= 1. Differentiable in alpha, u.
at::Tensor mocha_chunkwise(const at::Tensor& alpha, const at::Tensor& u, int64_t w,
                           const at::Tensor& in_lens = {}, const at::Tensor& out_lens = {});

/// MAtChA expected attention (000 eq. 28): the previous step's alignment alpha_prev
/// [B, U, T] (row i holds alpha_{i-1}), p [B, U, T] and chunk energies u [B, U, T] ->
/// beta [B, U, T]. Differentiable in all three.
at::Tensor matcha_chunkwise(const at::Tensor& alpha_prev, const at::Tensor& p,
                            const at::Tensor& u, const at::Tensor& in_lens = {},
                            const at::Tensor& out_lens = {});

/// Additive energies (002 eqs. 15-16, 000 eq. 5; mona/core/additive_energy.h): the
/// queries' part query [B, U, d] (W_s s + b), the keys [B, T, d] (W_h h), the weight
/// w [d] (v, or g v / ||v||) and an optional offset (r of 002 eq. 16, a 0-dim tensor) ->
/// e [B, U, T], e[b, i, j] = sum_k w[k] tanh(query[b, i, k] + keys[b, j, k]) + offset, one
/// fused pass each way, h = tanh(.) never stored. A query [B, d] is one decoder step
/// (U = 1: e [B, 1, T], its gradient [B, d]), as Energy::forward gives it for one query,
/// without a view between. Every entry is scored (mask padding after). Differentiable in
/// all four. Throws mona::ArgumentError naming the argument when a size or dtype does not
/// match.
at::Tensor additive_energy(const at::Tensor& query, const at::Tensor& keys, const at::Tensor& w,
                           const at::Tensor& offset = {});

/// Context vectors of attention (002 eq. 3, 000 eq. 26; mona/core/attention_context.h):
/// weights [B, T] of one output step and the memory's values [B, T, d] -> context [B, d],
/// c[b] = sum_j weights[b, j] values[b, j]: what bmm(weights.unsqueeze(1), values) returns,
/// in one pass each way instead of ATen's matrix product per batch element. Entries of weight
/// exactly 0 are skipped, so padding values never reach the context. Differentiable in both.
/// Throws mona::ArgumentError naming the argument when a size or dtype does not match.
at::Tensor attention_context(const at::Tensor& weights, const at::Tensor& values);

/// How the attention weights of monotonic_attention_step follow from its alignment.
enum class ChunkRule {
  kNone,      ///< hard monotonic attention: the weights are alpha_i itself (002 eqs. 13-14)
  kFixed,     ///< MoChA: chunks of w entries ending at the chosen one (000 eqs. 24-25)
  kAdaptive,  ///< MAtChA: chunks from t_{i-1} to t_i (000 eq. 28)
};

/// What monotonic_attention_step returns.
struct MonotonicStepOutput {
  at::Tensor alpha;    ///< alpha_i [B, T], the next step's alpha_prev
  at::Tensor weights;  ///< beta_i [B, T] (alpha_i itself under ChunkRule::kNone)
  at::Tensor context;  ///< c_i [B, D]
};

/// One decoder step of the monotonic family in expectation, from the step's energies to
/// its context (000 eqs. 20-26; with ChunkRule::kAdaptive eq. 28 in place of 25; with
/// kNone, 002 eqs. 12-14 and 3):
///
///   p_i     = sigmoid(e_i + noise_std * noise)           (000 eqs. 21-22, 002 eq. 12)
///   alpha_i = monotonic_alignment_step(p_i, alpha_prev)  (002 eqs. 13-14: 000 eq. 23's recurrence)
///   beta_i  = alpha_i                                    (kNone)
///             mocha_chunkwise(alpha_i, u_i, w)           (kFixed, 000 eq. 25)
///             matcha_chunkwise(alpha_prev, p_i, u_i)     (kAdaptive, 000 eq. 28)
///   c_i     = attention_context(beta_i, values)          (000 eq. 26)
///
/// The functions named are the ones composed, each the same core kernel, forward and
/// backward; here they make one autograd node where the composition records four to six
/// (and the sigmoid's, the noise's sum and the views between them), which is what an RNN
/// decoder's training pass pays per step once the batch is small.
///
/// Shapes: energy e_i and chunk_energy u_i [B, T] or [B, 1, T] (one step of
/// Energy::forward); noise like energy, or undefined for none (evaluation, or
/// noise_std = 0); alpha_prev [B, T]; values [B, T, D]; in_lens [B] or undefined. The
/// gradients of energy and chunk_energy have their shapes. chunk_energy is required by
/// kFixed and kAdaptive and must be undefined under kNone; w >= 1 is read by kFixed only.
/// Differentiable in energy, alpha_prev, chunk_energy and values (not in noise).
///
/// Errors (mona::ArgumentError, naming the argument and the values found): a rank, size or
/// dtype that does not match; a chunk_energy given or missing against `rule`; w < 1 under
/// kFixed; a non-finite noise_std; a NaN in energy or noise at a valid entry (mona::Error,
/// naming the entry [b, j]).
MonotonicStepOutput monotonic_attention_step(const at::Tensor& energy, const at::Tensor& noise, double noise_std,
                                             const at::Tensor& alpha_prev, const at::Tensor& chunk_energy,
                                             const at::Tensor& values, ChunkRule rule, int64_t w = 1,
                                             const at::Tensor& in_lens = {});

/// Softmax of energies e [B, U, T] over the valid entries of each row (soft attention,
/// 000 eqs. 4-6); padded rows and entries are 0. Differentiable in e.
at::Tensor masked_softmax(const at::Tensor& e, const at::Tensor& in_lens = {},
                          const at::Tensor& out_lens = {});

// ---------------------------------------------------------------------------------------
// Backward passes
//
// The analytic backward of each function above as a function of its own: the gradient of
// the output in, the tensors the forward keeps, the gradients of the inputs out. The
// autograd nodes of the functions above call them; so do callers that record their own
// graph, such as the PyTorch operators of python/src/ops.cc (torch.ops.mona.*_backward).
// Each checks its arguments as the forward does: ranks and sizes (those of the forward's
// input or output), dtypes, lengths, and throws mona::ArgumentError naming the argument;
// tensors need not be contiguous. Value errors found by a core kernel (p outside [0, 1], a
// non-finite gradient) arrive as mona::Error, as in the forward. The gradients are new
// contiguous tensors; entries past a length get zero.

/// Gradients of monotonic_alignment: grad_alpha [B, U, T], p [B, U, T] and the forward's
/// output alpha [B, U, T] -> (grad_p [B, U, T], grad_alpha0 [B, T]); alpha0 and the
/// lengths as given to the forward (alpha0 undefined: the default, whose gradient is still
/// returned). 002 eqs. 13-14 differentiated (mona/core/monotonic.h).
std::tuple<at::Tensor, at::Tensor> monotonic_alignment_backward(
    const at::Tensor& grad_alpha, const at::Tensor& p, const at::Tensor& alpha,
    const at::Tensor& in_lens = {}, const at::Tensor& out_lens = {},
    const at::Tensor& alpha0 = {});

/// Gradients of monotonic_alignment_step: grad_alpha [B, T], p [B, T], alpha_prev [B, T]
/// -> (grad_p [B, T], grad_alpha_prev [B, T]). 002 eq. 13 differentiated.
std::tuple<at::Tensor, at::Tensor> monotonic_alignment_step_backward(
    const at::Tensor& grad_alpha, const at::Tensor& p, const at::Tensor& alpha_prev,
    const at::Tensor& in_lens = {});

/// Gradients of mocha_chunkwise: grad_beta, alpha, u [B, U, T], chunk size w >= 1 ->
/// (grad_alpha, grad_u), both [B, U, T]. 000 eq. 17 / 25 differentiated.
std::tuple<at::Tensor, at::Tensor> mocha_chunkwise_backward(
    const at::Tensor& grad_beta, const at::Tensor& alpha, const at::Tensor& u, int64_t w,
    const at::Tensor& in_lens = {}, const at::Tensor& out_lens = {});

/// Gradients of matcha_chunkwise: grad_beta, alpha_prev, p, u and the forward's output beta,
/// all [B, U, T] -> (grad_alpha_prev, grad_p, grad_u), all [B, U, T]. 000 eq. 28
/// differentiated.
std::tuple<at::Tensor, at::Tensor, at::Tensor> matcha_chunkwise_backward(
    const at::Tensor& grad_beta, const at::Tensor& alpha_prev, const at::Tensor& p,
    const at::Tensor& u, const at::Tensor& beta, const at::Tensor& in_lens = {},
    const at::Tensor& out_lens = {});

/// Gradient of masked_softmax: grad_w and the forward's output w [B, U, T] -> grad_e
/// [B, U, T] (000 eqs. 4-6 differentiated).
at::Tensor masked_softmax_backward(const at::Tensor& grad_w, const at::Tensor& w,
                                   const at::Tensor& in_lens = {},
                                   const at::Tensor& out_lens = {});

/// Gradients of additive_energy: grad_e [B, U, T], query [B, U, d], keys [B, T, d], w [d]
/// -> (grad_query [B, U, d], grad_keys [B, T, d], grad_w [d]); 002 eqs. 15-16
/// differentiated. A one-step query [B, d] (as additive_energy takes it) takes grad_e
/// [B, 1, T] and gives grad_query [B, d]. output_mask says which are wanted; the others are
/// neither computed nor allocated (undefined). Throws mona::ArgumentError naming the
/// argument when a size or dtype does not match.
std::tuple<at::Tensor, at::Tensor, at::Tensor> additive_energy_backward(
    const at::Tensor& grad_e, const at::Tensor& query, const at::Tensor& keys,
    const at::Tensor& w, std::array<bool, 3> output_mask = {true, true, true});

/// Gradients of attention_context: grad_c [B, d], weights [B, T], values [B, T, d] ->
/// (grad_weights [B, T], grad_values [B, T, d]); 002 eq. 3 differentiated. output_mask as
/// for additive_energy_backward.
std::tuple<at::Tensor, at::Tensor> attention_context_backward(
    const at::Tensor& grad_c, const at::Tensor& weights, const at::Tensor& values,
    std::array<bool, 2> output_mask = {true, true});

}  // namespace mona::nn
