// mona/nn/gmm_attention.h: GMM attention (003 eqs. 4-8), source-aware GMM attention SAGMM
// (eqs. 9-13) and its truncated, streamable form SAGMM-tr (eqs. 14-20) as LibTorch modules
// in the shared mona::nn::Attention interface, plus their autograd functions.
//
// Kernels, formulas, the variance convention (sigma is a VARIANCE everywhere) and the
// backward pass: mona/core/gmm.h and docs/math/gmm.md.
//
// Module (H = GmmAttentionOptions::num_heads Gaussians, each with its own position):
//   per step i, from the query s_{i-1} [Dq]:  [Delta, v_raw, phi] = W s + b   (eq. 4)
//     Delta_h  = softplus(.)    then clamped to [0, max_step] (003 sec. 2.3 after eq. 13: 3; GmmAttentionOptions::max_step)
//     v_h      = softplus(v_raw) + min_variance   (a variance; the floor keeps it > 0)
//     w_h      = softmax_h(phi)                    (eq. 8)
//     mu_h(i)  = mu_h(i-1) + Delta_h,  mu_h(-1) = 0                       (eq. 5)
//   per memory entry j:
//     GMM:     nu_j = j + 1, delta_j = 1                                    (eqs. 6-7)
//     SAGMM:   delta_{h,j} = sigmoid(K_j W_delta + b)_h,  nu_h = cumsum_j delta_h  (9-10)
//   weights    alpha[i, j] = sum_h w_h delta_{h,j} N_window(nu_{h,j}; mu_h(i), v_h(i))
//   context    c_i = sum_j alpha[i, j] h_j
// The heads share the memory values h (a Gaussian mixture over one memory, Battenberg et
// al.'s form); 003's variant with per-head value projections concatenates per-head
// contexts and is left to a decoder that owns value projections.
//
// State: the training-time state of step() is mu(i-1) [B, H] (initial_state: zeros), not an
// alignment. For the kFixed window the training step() restarts the argmin of eq. 17 at
// entry 0 each step; with nondecreasing mu and strictly increasing nu (delta > 0) that gives
// the same gamma as forward(), which carries gamma from row to row.
//
// Online decoding: the streaming state of one hypothesis is a GmmHardState: per-head mu of
// the last emitted step, per-head core::GmmCursor and the data of a step some heads have
// already emitted (their windows) while others wait for input. Two entry points:
//   hard_step(query, memory, GmmHardState&)  the linear-time step on a mutable state;
//   hard_step(query, memory, HardState&)     the shared interface (Decoder::hard_step,
//       OnlineSearch, stream::Recognizer): HardState::extension holds an immutable
//       GmmHardState (null at the start of an utterance); each call copies it, runs the
//       step above on the copy and stores the copy as a new extension, so copies of a
//       HardState (beam hypotheses) never alias mutable data. HardState::t is set to the
//       last frame of the emitted window (-1 for an empty window); resume and exhausted
//       are unused. A mean past the last frame gives an empty window and a zero context;
//       when every head's mean lies past the last position of a finished input the step
//       reports kExhausted (it read the whole memory and chose nothing, as a monotonic scan
//       that runs off the end), so that 003's long-form rule (SearchOptions::
//       eos_only_at_last_entry) allows </s> once SAGMM-tr's window has passed the end.
// Copy cost: per-frame positions nu / delta depend only on the frames, not on the
// hypothesis, so they live in a GmmPositions object shared (std::shared_ptr) by every copy
// of a state: append-only, frame j's values never change once computed, and a step that
// sees more frames than computed appends them (O(new frames)). What a step copies is the
// per-hypothesis part only: O(H) numbers plus the weights of the windows of heads that
// emitted while another head waits (bounded by the window sizes, not by T). A state, and
// its copies, belong to one utterance of one stream: after OnlineMemory::reset() start
// from a fresh state (hard_step throws if the memory has fewer frames than the shared
// positions). Not thread-safe across hypotheses of one stream (they share the positions).
// It emits when every head's window is closed (kAdaptive: a frame at or past
// mu + radius sqrt(v); kFixed: gamma + floor((c-1)/2) arrived; kNone: input finished).
//
// Config names (make_attention, mona/nn/attention.h): "gmm" (no window, offline),
// "sagmm" (source aware, no window, offline), "sagmm-tr" (adaptive window, streams) and
// "sagmm-fixed" (fixed window of width c, streams); see GmmAttentionOptions (AttentionOptions::gmm).
//
// Length penalty (eq. 13) in training: Seq2Seq::loss's LengthPenaltyOptions
// (mona/nn/seq2seq.h) uses gmm_length_penalty below.
//
// EOS (003 sec. 2.4): append_eos_frame() appends an all-ones frame after the last valid
// frame of each sequence with probability p_eos during training.
#pragma once

#include <ATen/core/Generator.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mona/core/gmm.h"
#include "mona/nn/attention.h"

namespace mona::nn {

// ---------------------------------------------------------------------------------------
// Autograd functions (their backward passes are first order: create_graph=True through one
// throws c10::NotImplementedError naming the function)

/// GMM / SAGMM / SAGMM-tr weights (mona/core/gmm.h; 003 eqs. 4-8, 9-12, 14-16 and 17-20 by
/// options.window and the positions given): mu, variance, weights [B, U, H]; nu,
/// delta [B, T] (undefined: nu_j = j + 1, delta_j = 1; weights undefined: 1) -> alpha
/// [B, U, T]. Differentiable in mu, variance, weights, nu and delta. T is nu's or delta's
/// size, or max(in_lens) when both are left out. Throws mona::ArgumentError naming the
/// argument and value for a bad shape, dtype or length, and naming in_lens and T when
/// T = max(in_lens) makes tensors that cannot be counted or allocated.
at::Tensor gmm_attention_weights(const at::Tensor& mu, const at::Tensor& variance,
                                 const at::Tensor& weights, const at::Tensor& nu,
                                 const at::Tensor& delta, const core::GmmOptions& options = {},
                                 const at::Tensor& in_lens = {},
                                 const at::Tensor& out_lens = {});

/// Length penalty of 003 eq. 13 per sequence: mu [B, U, H], nu [B, T] (undefined: j + 1,
/// T = max(in_lens)) -> [B]. Differentiable in mu and nu. Returns zeros (no graph) when
/// `step` >= `until_step` (003 switches it off after 200k steps; until_step < 0 means never
/// off). Throws mona::ArgumentError as gmm_attention_weights does.
at::Tensor gmm_length_penalty(const at::Tensor& mu, const at::Tensor& nu, double lambda,
                              const at::Tensor& in_lens = {}, const at::Tensor& out_lens = {},
                              int64_t step = 0, int64_t until_step = -1);

// ---------------------------------------------------------------------------------------
// EOS frame (003 sec. 2.4)

/// The EOS frame itself: [1, dim] of ones (003 sec. 2.4's 1-vector), what append_eos_frame
/// appends and the streaming runtime appends when the input finishes.
at::Tensor eos_frame(int64_t dim, const at::TensorOptions& options);

/// Result of append_eos_frame.
struct EosBatch {
  at::Tensor memory;   ///< [B, T + 1, D]: frame lengths[b] is all ones where appended
  at::Tensor lengths;  ///< [B] int64: lengths + appended
  at::Tensor appended; ///< [B] bool: which sequences received the frame (train EOS on these)
};

/// Appends an all-ones frame right after the last valid frame of each sequence with
/// probability p_eos (drawn from `gen`; p_eos = 1 appends to all). memory [B, T, D],
/// lengths [B] (undefined: all T). Throws mona::ArgumentError for p_eos outside [0, 1].
EosBatch append_eos_frame(const at::Tensor& memory, const at::Tensor& lengths, double p_eos,
                          at::Generator gen = {});

// ---------------------------------------------------------------------------------------
// Modules

/// Per-frame positions of one stream, shared by every copy of a GmmHardState (see the
/// header comment): append-only; entries [0, frames) never change once computed.
struct GmmPositions {
  std::vector<std::vector<double>> nu;     ///< [H][frames] positions of the frames so far
  std::vector<std::vector<double>> delta;  ///< [H][frames] scales
  int64_t frames = 0;                      ///< frames whose positions are computed
};

/// Streaming state of one hypothesis for GMM-family hard steps. Copyable: copies share the
/// (append-only) positions and own the rest.
struct GmmHardState : HardStateExtension {
  std::shared_ptr<GmmPositions> positions;  ///< shared by copies; null before the first step
  std::vector<double> mu;       ///< [H] mu of the last emitted step (start: 0)
  int64_t frames = 0;           ///< frames available at this state's last step
  std::vector<core::GmmCursor> cursors;  ///< [H]
  /// Per head, while a step is pending: whether the head has emitted and its window.
  std::vector<char> done;
  std::vector<int64_t> begin, end;
  std::vector<std::vector<double>> window_weights;
  int64_t touched() const;      ///< frames read by all heads so far
  void reset() { *this = GmmHardState(); }
};

/// GMM attention (003 eqs. 4-8) and, with source_aware, SAGMM (eqs. 9-12) with the window
/// `window` (kNone: offline; kAdaptive: SAGMM-tr, eqs. 14-16; kFixed: eqs. 17-20). Sizes from
/// options.gmm (H = options.gmm.num_heads). make_attention builds it from a mechanism's name.
class GmmAttention : public Attention {
 public:
  /// Throws mona::ArgumentError naming the field for invalid options.
  GmmAttention(const AttentionOptions& options, bool source_aware, core::GmmWindow window);
  /// mu(i-1) [B, H] of zeros.
  at::Tensor initial_state(const Memory& memory) const override;
  /// SequenceOutput.alignment = alpha (same as weights).
  SequenceOutput forward(const at::Tensor& queries, const Memory& memory,
                         const at::Tensor& out_lengths = {}) override;
  /// Shared-interface online step: state.extension holds an immutable GmmHardState (null:
  /// start of the utterance) that is replaced by a new one (see the header comment).
  void hard_step_into(const at::Tensor& query, const OnlineMemory& memory, HardState& state,
                      HardStepOutput& out) override;
  using Attention::hard_step;
  /// Linear-time online step. HardStepOutput.begin/index span the union of the heads'
  /// windows, weights are the mixture weights over it; monotonic_energies counts frames read.
  /// Status kChose, or kExhausted for an input that is finished when every head's window
  /// is empty and its mean lies past the head's last position nu_{n-1} (zero context,
  /// index -1, mu advanced as for kChose); kNeedMoreInput while a window may still grow.
  HardStepOutput hard_step(const at::Tensor& query, const OnlineMemory& memory,
                           GmmHardState& state);
  bool is_online() const override { return window_.window != core::GmmWindow::kNone; }
  /// kFixed (sagmm-fixed): gamma_{i-1} - (c - 1) / 2, the least over the heads: gamma never
  /// decreases (003 eq. 17 searches from gamma_{i-1}) and the window is gamma +- (c - 1) / 2
  /// (eqs. 18, 20). kAdaptive (sagmm-tr) with gmm.max_variance > 0: the first entry whose
  /// position exceeds mu_{i-1} - r sqrt(max_variance) for some head, less one; without
  /// that bound 0 (every entry kept), since the window's lower edge mu - r sigma could
  /// move back without limit. kNone: 0.
  int64_t first_needed(const HardState& state) const override;
  const GmmAttentionOptions& gmm_options() const { return options_.gmm; }
  /// SAGMM positions nu = cumsum(sigmoid(K W_delta)) (eqs. 9-10); false: nu_j = j + 1.
  bool source_aware() const { return source_aware_; }
  /// The window: kind, radius and width (the last two from options.gmm).
  const core::GmmOptions& window() const { return window_; }

  /// Per-step Gaussian parameters of queries [B, U, Dq]: step sizes, variances, mixture
  /// weights, each [B, U, H] (exposed for the length penalty and for plots).
  struct Params {
    at::Tensor step, variance, weights;
  };
  Params params(const at::Tensor& queries);
  /// Positions and scales of a prepared memory: nu, delta [B, H, T].
  std::pair<at::Tensor, at::Tensor> positions(const Memory& memory) const;
  /// A memory's positions and lengths with the heads folded into the batch: nu, delta
  /// [B*H, T], in_lens [B*H] (undefined for all T); what every step over the memory reads.
  struct FoldedPositions {
    at::Tensor nu, delta, in_lens;
  };

  torch::nn::Linear query_proj{nullptr};  ///< W_Delta, W_sigma, W_phi of eq. 4 (3H outputs)
  std::shared_ptr<Energy> position_energy;  ///< K W_delta of eq. 9 (keys [.., T, H])

 protected:
  /// step(): state = mu(i-1) [B, H]; StepOutput.state = mu(i) [B, H].
  StepOutput step_with(SharedSteps* shared, const at::Tensor& query, const Memory& memory,
                       const at::Tensor& state) override;
  /// What unroll()'s steps share: the query projection of 003 eq. 4 unrolled
  /// (mona/nn/unrolled_linear.h) and the memory's positions of eqs. 9-10 (positions() and
  /// the lengths, folded). No energy: the position energy's keys are the memory's, read as
  /// they are.
  std::unique_ptr<SharedSteps> share_steps(const Memory& memory, int64_t steps) override;
  Energy& main_energy() override { return *position_energy; }
  /// params() of the query projections raw [B, U, 3H] (003 eqs. 4-8).
  Params params_of(const at::Tensor& raw) const;
  FoldedPositions folded_positions(const Memory& memory) const;
  /// alpha [B, U, T] from mu, variance, weights [B, U, H] (heads folded into the batch).
  at::Tensor weights_of(const at::Tensor& mu, const at::Tensor& variance, const at::Tensor& weights,
                        const FoldedPositions& positions, const at::Tensor& out_lengths);
  bool source_aware_ = false;
  core::GmmOptions window_;
};

}  // namespace mona::nn
