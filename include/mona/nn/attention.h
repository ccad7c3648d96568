// mona/nn/attention.h: attention mechanisms as LibTorch modules, one interface for all.
//
//   SoftAttention        softmax over the whole memory (000 eqs. 4-6); offline baseline
//   MonotonicAttention   hard monotonic attention (002): trained in expectation
//                        (002 eqs. 11-14), decoded by the online scan (002 Algorithm 1)
//   MoChA                monotonic chunkwise attention, chunk size w (000 eqs. 14-26,
//                        Algorithm 1)
//   MAtChA               monotonic adaptive chunkwise attention (000 App. C, eqs. 27-28)
//   GmmAttention         GMM / SAGMM / SAGMM-tr (003), in mona/nn/gmm_attention.h; its
//                        step() state is mu [B, H] (per-head means), not an alignment
//
// Every mechanism offers three ways to run:
//   step()     training step for RNN decoders: one query s_{i-1} [B, Dq] against the
//              prepared memory -> context c_i [B, Dh], weights [B, T], new state (the
//              monotonic alignment alpha_i [B, T]; soft attention keeps none).
//   forward()  whole output sequence for parallel decoders: queries [B, U, Dq] ->
//              contexts [B, U, Dh], weights [B, U, T].
//   hard_step()  test-time online step over an OnlineMemory that grows frame by frame:
//              from HardState (t_{i-1}) it evaluates energies only for the entries it
//              inspects and returns the context, t_i and whether it emitted, needs more
//              input, or exhausted a finished input. PreparedHardStep (below) is the same
//              step of hard monotonic attention on raw arrays, checked once per stream.
// step() and forward() compute exactly the same weights (forward is step unrolled with
// the previous alignment fed back); both are differentiable in the query, the memory and
// the parameters. unroll() gives an RNN decoder's steps over one training sequence: each
// step what step() computes, with what the steps share (the energies' normalised v, their
// query projections' weight gradients) computed once per sequence instead of once per step.
// A step of the monotonic family is its energies' nodes and one more, from the energies to
// the context (monotonic_attention_step, mona/nn/functional.h).
//
// Training noise (002 sec. 2.5): in training mode, p = sigmoid(e + noise_std * N(0, 1)),
// drawn from the module's own generator (seed in AttentionOptions, reseed with
// reseed_noise()). In eval mode no noise is added.
//
// Masking: memory entries at or past a sequence's length never receive attention weight
// or gradient (the kernels skip them); rows past an output length are zero.
//
// After a hard step scans the whole of a finished input without choosing an entry, the
// attention has run off the end: that step and all later ones return a zero context
// (status kExhausted), which is what the expected alignment used in training assigns to
// that event (002 sec. 2.3).
#pragma once

#include <ATen/core/Generator.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "mona/core/rng.h"
#include "mona/core/scan.h"
#include "mona/nn/energy.h"
#include "mona/nn/functional.h"

namespace mona::nn {

/// Settings of the GMM family ("gmm", "sagmm", "sagmm-tr", "sagmm-fixed";
/// mona/nn/gmm_attention.h, 003), read as AttentionOptions::gmm. Which positions and which
/// window a mechanism uses follows from its name (make_attention); these are its sizes.
struct GmmAttentionOptions {
  int64_t num_heads = 1;        ///< H Gaussians per step, mixed by softmax_h(phi) (003 eq. 8)
  double window_radius = 2.0;   ///< sagmm-tr: window |nu - mu| < r sqrt(variance) (eq. 14)
  int64_t window_width = 4;     ///< sagmm-fixed: window width c in entries (eqs. 17-20)
  /// Clamp of the step Delta to [0, max_step] entries (003 sec. 2.3: 3), applied to every GMM
  /// mechanism; <= 0: no clamp (003's plain GMM, eqs. 4-5, has none).
  double max_step = 3.0;
  double min_variance = 1e-4;   ///< floor added to the softplus variance (> 0)
  /// > 0: the variance is clamped to at most this (not in 003). It bounds how far back
  /// sagmm-tr's window (eq. 14) can reach, r sqrt(max_variance) positions behind the last
  /// mean, so that a stream releases the memory behind it (Attention::first_needed); 0: no
  /// clamp, and sagmm-tr keeps its whole memory.
  double max_variance = 0.0;
  double init_step_bias = 0.5;  ///< initial bias of Delta's pre-softplus (about 1 entry/step)
  /// Throws mona::ArgumentError naming the field (prefixed by `who`) and the value.
  void validate(const char* who) const;
};

/// The largest vocabulary, width, head or layer count that AttentionOptions::validate() and
/// ModelOptions::validate() (nn/seq2seq.h) take: the layers' sizes are products of these,
/// and larger ones overflow int64. It bounds arithmetic, not memory: sizes near it still ask
/// for more memory than a machine has (a layer of kMaxModelSize^2 floats is 4 TiB), which
/// LibTorch refuses with its own error.
constexpr int64_t kMaxModelSize = int64_t{1} << 20;

/// Configuration shared by the attention modules. Defaults follow 000 / 002.
struct AttentionOptions {
  int64_t query_dim = 0;        ///< Dq, decoder state size
  int64_t memory_dim = 0;       ///< Dh, encoder state (memory entry) size
  int64_t attention_dim = 0;    ///< d, additive energy hidden size (0: = Dh)
  std::string energy = "additive";            ///< soft / chunk energy: "additive" | "dot"
  std::string monotonic_energy = "additive";  ///< 002 eq. 16 "additive" | eq. 17 "dot"
  double init_r = -4.0;         ///< initial r of the monotonic energy (002 App. G)
  double noise_std = 1.0;       ///< pre-sigmoid noise in training mode (002 sec. 2.5)
  uint64_t seed = 0;            ///< seeds the training noise and each stream's hard-step sampling
  int64_t chunk_size = 4;       ///< w (MoChA)
  /// hard step chooses when p_choose >= tau (000 Algorithm 1, p >= 0.5; 002 sec. 2.5 writes
  /// p > tau, which differs only when p equals tau exactly)
  double tau = 0.5;
  bool sample = false;          ///< hard step samples z ~ Bernoulli(p) instead
  GmmAttentionOptions gmm;      ///< the GMM family's settings (ignored by the others)
  /// Throws mona::ArgumentError naming the field and value when a setting is invalid
  /// (dims outside [1, kMaxModelSize], attention_dim outside [0, kMaxModelSize], ...).
  void validate(const char* who) const;
};

/// A memory prepared once per input sequence: values h, lengths and the keys of each
/// energy (computed once per memory entry, never per decoder step).
struct Memory {
  at::Tensor values;      ///< h [B, T, Dh]
  at::Tensor lengths;     ///< [B] int64, or undefined for all T
  at::Tensor keys;        ///< monotonic (or soft) energy keys [B, T, Dk]
  at::Tensor chunk_keys;  ///< chunk energy keys (MoChA, MAtChA) [B, T, Dk']
  int64_t batch() const { return values.size(0); }
  int64_t in_len() const { return values.size(1); }
};

/// Result of a training step.
struct StepOutput {
  at::Tensor context;  ///< c_i [B, Dh]
  at::Tensor weights;  ///< attention weights over the memory [B, T]
  at::Tensor state;    ///< alpha_i [B, T] (monotonic mechanisms), undefined for soft
};

/// What the steps of one training sequence share, made once per sequence by
/// Attention::unroll (Attention::share_steps): by default the mechanism's energies unrolled
/// (Energy::unroll); a mechanism may keep more (the GMM family: its query projection
/// unrolled, the memory's positions).
struct SharedSteps {
  virtual ~SharedSteps() = default;
  std::unique_ptr<UnrolledEnergy> main;   ///< the steps of main_energy(), or null
  std::unique_ptr<UnrolledEnergy> chunk;  ///< the steps of chunk_energy(), or null
};

/// Result of a whole-sequence forward.
struct SequenceOutput {
  at::Tensor contexts;   ///< [B, U, Dh]
  at::Tensor weights;    ///< [B, U, T]
  at::Tensor alignment;  ///< monotonic alignment alpha [B, U, T] (undefined for soft)
};

/// Memory of one stream that grows as input arrives (online decoding). Values and keys
/// are stored in buffers that double in capacity, so appending is amortised O(frames).
///
/// Entries are indexed by their position in the stream, 0 .. size() - 1, however many have
/// been released: release_before(j) declares that no step will read an entry before j
/// again (the runtime asks the attention, Attention::first_needed), and the memory drops
/// them, moving the rest to the front of its buffers once at least as many entries are
/// dropped as are held (amortised O(1) per entry). A stream whose attention keeps
/// releasing therefore holds a bounded number of entries however long it runs.
class OnlineMemory {
 public:
  /// Entries received so far (released ones included): the next entry's position.
  int64_t size() const { return size_; }
  /// Position of the first entry still readable (0 until something is released).
  int64_t first() const { return released_; }
  /// Entries stored now (readable ones and released ones not yet moved out): what the
  /// memory costs.
  int64_t held() const { return size_ - base_; }
  bool finished() const { return finished_; }
  /// No more input will arrive.
  void finish() { finished_ = true; }
  /// Readable entries, rows first() .. size() - 1: values [n, Dh], keys [n, Dk], chunk
  /// keys [n, Dk'] (n = size() - first()).
  at::Tensor values() const;
  at::Tensor keys() const;
  at::Tensor chunk_keys() const;
  /// Drops the entries before position `position` (clamped to size(); positions at or
  /// before first() change nothing). Reading a released entry is a bug of the caller;
  /// hard steps check it (mona::ArgumentError naming the position).
  void release_before(int64_t position);
  /// Forget everything (a new utterance).
  void reset();
  /// dtype of the stored entries (meaningful once size() > 0); no tensor op.
  at::ScalarType dtype() const { return dtype_; }

 private:
  friend class Attention;
  friend class GmmAttention;
  template <class T>
  friend class PreparedHardStep;
  void append(const at::Tensor& values, const at::Tensor& keys, const at::Tensor& chunk_keys);
  // Row of position j in the buffers (j >= base_).
  int64_t row(int64_t j) const { return j - base_; }
  at::Tensor values_, keys_, chunk_keys_;  // capacity-sized buffers; row 0 is position base_
  // Their data, read by every hard step without going through the tensor API (updated
  // whenever a buffer is replaced).
  const void* values_data_ = nullptr;
  const void* keys_data_ = nullptr;
  const void* chunk_keys_data_ = nullptr;
  // Their row sizes Dh, Dk, Dk' and dtype, for the same reason.
  int64_t value_dim_ = 0, key_dim_ = 0, chunk_key_dim_ = 0;
  at::ScalarType dtype_ = at::kFloat;
  int64_t size_ = 0;
  int64_t base_ = 0;      // position stored in row 0
  int64_t released_ = 0;  // positions before this one are released (>= base_)
  bool finished_ = false;
};

/// Mechanism-specific online state beyond the scan position (e.g. the GMM family's
/// per-head means and cursors). Treated as immutable once stored: a hard step replaces
/// it with a new object, so copying a HardState (beam search) is cheap and copies never
/// alias mutable data.
struct HardStateExtension {
  virtual ~HardStateExtension() = default;
};

/// Where the hard attention stands: t_{i-1} and, while waiting for input, the
/// first entry not yet inspected by the current step.
struct HardState {
  int64_t t = 0;         ///< t_{i-1}: entry chosen at the previous step (t_0 = 0)
  int64_t resume = 0;    ///< where the current step continues its scan
  bool exhausted = false;  ///< ran off the end of a finished input
  std::shared_ptr<const HardStateExtension> extension;  ///< mechanism-specific, or null
  /// Sampling mode (AttentionOptions::sample): the stream's own generator of the draws
  /// z ~ Bernoulli(p), started from AttentionOptions::seed at its first sampled step. A
  /// copy (a beam hypothesis) continues the same sequence; no stream's draws depend on
  /// another's, and the same input gives the same draws however often it is decoded.
  core::Rng sample_rng{0};
  bool sample_rng_started = false;
};

/// Result of a hard (test-time) step.
struct HardStepOutput {
  /// What the step did, in the core scan's words (mona/core/scan.h): kChose (entry `index`
  /// chosen, context valid), kNeedMoreInput (every available entry scanned; call again after
  /// more input), kExhausted (finished input scanned without choosing; context is zero).
  core::ScanStatus status = core::ScanStatus::kNeedMoreInput;
  /// [Dh], zero when status is kExhausted (undefined when it is kNeedMoreInput, except after
  /// hard_step_into, which then leaves the previous tensor in place, as for weights)
  at::Tensor context;
  /// weights of the chunk entries [begin, index] ([n]); [0] when status is kExhausted
  at::Tensor weights;
  int64_t index = -1;        ///< t_i, the chosen entry (last entry of the chunk)
  int64_t begin = -1;        ///< first entry of the attended chunk
  int64_t monotonic_energies = 0;  ///< monotonic energies evaluated by this call
  int64_t chunk_energies = 0;      ///< chunk / soft energies evaluated by this call
};

class UnrolledAttention;

/// The interface every mechanism implements (see the header comment).
class Attention : public torch::nn::Module {
 public:
  explicit Attention(AttentionOptions options)
      : options_(std::move(options)),
        // An invalid tau is reported by the mechanism's constructor (options_.validate).
        threshold_rule_(options_.tau > 0 && options_.tau < 1 ? options_.tau
                                                                         : 0.5) {}

  /// Prepares a memory h [B, T, Dh] with optional lengths [B] (computes the keys). Throws
  /// mona::ArgumentError naming the argument for another rank or Dh, or lengths that are not
  /// [B] int64 within [0, T].
  Memory prepare(const at::Tensor& memory, const at::Tensor& lengths = {});
  /// Initial state: alpha_0 [B, T] with all mass on entry 0 (undefined for soft).
  virtual at::Tensor initial_state(const Memory& memory) const;
  /// Training step for RNN decoders: query s_{i-1} [B, Dq], previous state.
  StepOutput step(const at::Tensor& query, const Memory& memory, const at::Tensor& state) {
    return step_with(nullptr, query, memory, state);
  }
  /// The steps of one training sequence through `memory`, for an RNN decoder whose step i's
  /// query is the state step i-1 produced (000 Algorithm 1; the decoder of
  /// mona/nn/seq2seq.h): at most `steps` steps, each computing what step() computes for its
  /// query and state, to rounding (tests/nn/test_attention.cc), with what the steps share
  /// made once (share_steps). The parameters are read when the steps are made (an optimizer
  /// step reaches the next sequence's). `memory` is kept. Throws mona::ArgumentError for
  /// steps < 0 or a memory that prepare() did not make.
  UnrolledAttention unroll(const Memory& memory, int64_t steps);
  /// Whole output sequence: queries [B, U, Dq], optional output lengths [B].
  virtual SequenceOutput forward(const at::Tensor& queries, const Memory& memory,
                                 const at::Tensor& out_lengths = {}) = 0;

  /// Appends frames [n, Dh] to a stream's memory, computing their keys once. Throws
  /// mona::ArgumentError for another shape or Dh, or a memory whose input is finished.
  void extend(OnlineMemory& memory, const at::Tensor& frames);
  /// Test-time step for one stream (002 Alg. 1's scan from t_{i-1}; MoChA then attends
  /// over the chunk of 000 eqs. 14-16, MAtChA over [t_{i-1}, t_i] of 000 App. C): query
  /// s_{i-1} [Dq] of the memory's dtype -> HardStepOutput (context [Dh], weights [n]).
  /// No autograd. Returns new tensors. Throws mona::ArgumentError naming the argument for an
  /// undefined or non-CPU query, a query without Dq values, or a dtype other than the
  /// memory's.
  HardStepOutput hard_step(const at::Tensor& query, const OnlineMemory& memory,
                           HardState& state) {
    HardStepOutput out;
    hard_step_into(query, memory, state, out);
    return out;
  }
  /// The same step, written into `out` (the out= convention of ATen): every field is set
  /// anew, and out.context / out.weights keep their storage when they already have the
  /// size and dtype of the result and nothing else refers to them (no other tensor handle
  /// or view); otherwise they are replaced by new tensors, so a context the caller kept is
  /// never overwritten. A decoding loop that passes the same `out` at every step therefore
  /// allocates nothing once the sizes settle. Throws like hard_step.
  virtual void hard_step_into(const at::Tensor& query, const OnlineMemory& memory,
                              HardState& state, HardStepOutput& out) = 0;

  /// The first memory position that a hard step from `state` (or any later one) can read:
  /// the runtime releases the entries before it (OnlineMemory::release_before). Hard
  /// monotonic attention reads from where its scan resumes on (HardState::resume: t_{i-1}
  /// after a choice, further while it scans, 002 Alg. 1), MoChA from resume - w + 1 (the
  /// chunk of 000 eq. 14 ends at t_i >= resume), MAtChA from t_{i-1} (its chunk
  /// [t_{i-1}, t_i], 000 App. C: while its scan goes on without choosing, the entries since
  /// t_{i-1} are kept); mechanisms that attend over the whole input (soft, GMM and SAGMM
  /// without a window) return 0 and keep every entry.
  virtual int64_t first_needed(const HardState& state) const { (void)state; return 0; }

  /// Restarts the training-noise generator from `seed`. (Sampling at test time draws from
  /// each stream's HardState::sample_rng.)
  void reseed_noise(uint64_t seed);
  /// State of the training-noise generator (saved in checkpoints for exact resumption).
  at::Tensor noise_state() const { return noise_gen_.get_state(); }
  void set_noise_state(const at::Tensor& state) { noise_gen_.set_state(state); }
  const AttentionOptions& options() const { return options_; }
  /// Whether hard_step can emit before the input is finished.
  virtual bool is_online() const { return true; }

 protected:
  template <class T>
  friend class PreparedHardStep;  // reads main_energy() and chunk_energy()
  /// The energy whose keys go into Memory::keys / OnlineMemory::keys.
  virtual Energy& main_energy() = 0;
  /// The chunk energy (MoChA, MAtChA), or null.
  virtual Energy* chunk_energy() { return nullptr; }
  /// Throws mona::ArgumentError naming `fn` and `name` unless `t` has the dtype of this
  /// module's parameters (what prepare, extend and hard steps compute with).
  void check_dtype(const at::Tensor& t, const char* fn, const char* name) const;
  friend class UnrolledAttention;  // calls step_with()
  /// step() within an unrolled sequence, reading what its steps share (`shared`, made by
  /// share_steps), or on its own (null).
  virtual StepOutput step_with(SharedSteps* shared, const at::Tensor& query, const Memory& memory,
                               const at::Tensor& state) = 0;
  /// What unroll()'s steps share (see SharedSteps): here main_energy() and chunk_energy()
  /// unrolled for `steps` steps of the memory's batch.
  virtual std::unique_ptr<SharedSteps> share_steps(const Memory& memory, int64_t steps);
  /// One step's energies [B, 1, T] of main_energy() (chunk_energy()): query [B, Dq] against
  /// keys [B, T, Dk], by the unrolled energy in `shared` when not null, else by forward().
  at::Tensor main_energy_step(SharedSteps* shared, const at::Tensor& query, const at::Tensor& keys);
  at::Tensor chunk_energy_step(SharedSteps* shared, const at::Tensor& query, const at::Tensor& keys);
  /// The pre-sigmoid noise of a training step (002 sec. 2.5, 000 eq. 21): standard normal
  /// values shaped like `energy`, from the noise generator, in training mode with
  /// options.noise_std > 0; otherwise undefined (none). The caller scales it by noise_std.
  at::Tensor training_noise(const at::Tensor& energy);
  /// p = sigmoid(e + noise_std * training_noise(e)).
  at::Tensor selection_probability(const at::Tensor& energy);
  /// Hard monotonic scan over `memory` for one query, into `out` (all fields reset); on
  /// kChose fills index.
  void scan(const at::Tensor& query, const OnlineMemory& memory, HardState& state,
            HardStepOutput& out);
  /// Context sum_k w_k h_k over entries [begin, end] with chunk softmax of chunk energies.
  void chunk_context(const at::Tensor& query, const OnlineMemory& memory, int64_t begin,
                     int64_t end, HardStepOutput& out);

  AttentionOptions options_;
  core::EnergyThreshold threshold_rule_;  ///< sigmoid(e) >= tau, decided on the energy
  at::Generator noise_gen_;
};

/// One training sequence's steps through an attention mechanism (Attention::unroll).
class UnrolledAttention {
 public:
  /// The next step: query s_{i-1} [B, Dq] and the previous state, as for Attention::step.
  /// Errors: those of Attention::step, and a step beyond the `steps` of Attention::unroll.
  StepOutput step(const at::Tensor& query, const at::Tensor& state);

 private:
  friend class Attention;
  UnrolledAttention(Attention& attention, const Memory& memory, int64_t steps, std::unique_ptr<SharedSteps> shared)
      : attention_(&attention), memory_(memory), steps_(steps), shared_(std::move(shared)) {}
  Attention* attention_;
  Memory memory_;
  int64_t steps_, taken_ = 0;
  std::unique_ptr<SharedSteps> shared_;
};

/// Builds the energy named by `kind` ("additive" | "dot"); `monotonic` selects 002 eq. 16
/// over eq. 15 for the additive kind.
std::shared_ptr<Energy> make_energy(const std::string& kind, const EnergyOptions& options,
                                    bool monotonic);

/// Soft attention (000 eqs. 4-6), the offline baseline. Its hard_step waits for the
/// finished input and then attends over all of it.
class SoftAttention : public Attention {
 public:
  explicit SoftAttention(const AttentionOptions& options);
  SequenceOutput forward(const at::Tensor& queries, const Memory& memory,
                         const at::Tensor& out_lengths = {}) override;
  void hard_step_into(const at::Tensor& query, const OnlineMemory& memory, HardState& state,
                      HardStepOutput& out) override;
  bool is_online() const override { return false; }
  at::Tensor initial_state(const Memory&) const override { return {}; }
  std::shared_ptr<Energy> energy;

 protected:
  StepOutput step_with(SharedSteps* shared, const at::Tensor& query, const Memory& memory,
                       const at::Tensor& state) override;
  Energy& main_energy() override { return *energy; }
};

/// Hard monotonic attention (002).
class MonotonicAttention : public Attention {
 public:
  explicit MonotonicAttention(const AttentionOptions& options);
  SequenceOutput forward(const at::Tensor& queries, const Memory& memory,
                         const at::Tensor& out_lengths = {}) override;
  void hard_step_into(const at::Tensor& query, const OnlineMemory& memory, HardState& state,
                      HardStepOutput& out) override;
  int64_t first_needed(const HardState& state) const override { return state.resume; }
  std::shared_ptr<Energy> monotonic;

 protected:
  StepOutput step_with(SharedSteps* shared, const at::Tensor& query, const Memory& memory,
                       const at::Tensor& state) override;
  Energy& main_energy() override { return *monotonic; }
  /// step() of the monotonic family, argument checks included (`fn` names the caller): the
  /// step's energies (and chunk energies under a chunk rule), then monotonic_attention_step
  /// (mona/nn/functional.h) with this module's noise, chunk size and `rule` (kNone here,
  /// kFixed for MoChA, kAdaptive for MAtChA).
  StepOutput expected_step(SharedSteps* shared, const at::Tensor& query, const Memory& memory,
                           const at::Tensor& state, ChunkRule rule, const char* fn);
};

/// MoChA with chunk size w = options.chunk_size (000).
class MoChA : public MonotonicAttention {
 public:
  explicit MoChA(const AttentionOptions& options);
  SequenceOutput forward(const at::Tensor& queries, const Memory& memory,
                         const at::Tensor& out_lengths = {}) override;
  void hard_step_into(const at::Tensor& query, const OnlineMemory& memory, HardState& state,
                      HardStepOutput& out) override;
  int64_t first_needed(const HardState& state) const override {
    return std::max<int64_t>(0, state.resume - options_.chunk_size + 1);
  }
  std::shared_ptr<Energy> chunk;

 protected:
  StepOutput step_with(SharedSteps* shared, const at::Tensor& query, const Memory& memory,
                       const at::Tensor& state) override;
  Energy* chunk_energy() override { return chunk.get(); }
};

/// MAtChA (000 App. C): soft attention over the adaptive chunk [t_{i-1}, t_i].
class MAtChA : public MonotonicAttention {
 public:
  explicit MAtChA(const AttentionOptions& options);
  SequenceOutput forward(const at::Tensor& queries, const Memory& memory,
                         const at::Tensor& out_lengths = {}) override;
  void hard_step_into(const at::Tensor& query, const OnlineMemory& memory, HardState& state,
                      HardStepOutput& out) override;
  int64_t first_needed(const HardState& state) const override { return state.t; }
  std::shared_ptr<Energy> chunk;

 protected:
  StepOutput step_with(SharedSteps* shared, const at::Tensor& query, const Memory& memory,
                       const at::Tensor& state) override;
  Energy* chunk_energy() override { return chunk.get(); }
};

/// Hard monotonic attention's online step (002 Algorithm 1 with the threshold rule of 002
/// sec. 2.5; energies e_j = g <s, W h_j> + r, 002 eq. 17) on raw arrays, for decoding loops
/// in which the step itself is the cost: the step hard_step_into takes, with everything it
/// establishes on every call (the mechanism, the energy's form and scalars, the query's
/// shape and dtype) established once, here, and the context handed out
/// as the chosen memory row in place instead of a copy. At T = U = 100, d = 256 a step
/// takes about 30-45% of hard_step_into's time in float32, 40-55% in float64
/// (docs/benchmarks.md: the grid's pool and the L2-resident one).
///
/// Bound to one mechanism and one stream's memory, both of which must outlive it. The
/// energy's g and r are read at construction: a step after the parameters change (an
/// optimiser step, load) uses the old ones, so build one per decoding session. The memory
/// may grow (Attention::extend), finish and release entries between steps, as with
/// hard_step_into; a HardState may be passed to either, in any mix, and both decide
/// identically (the same kernel on the same keys). T: float or double, the memory's dtype.
template <class T>
class PreparedHardStep {
 public:
  /// Throws mona::ArgumentError naming the mechanism or energy unless `attention` is hard
  /// monotonic attention ("monotonic": MoChA and MAtChA attend over a chunk, the GMM family
  /// is no MonotonicAttention) in threshold mode (options.sample false) with a
  /// dot-product monotonic energy ("dot"), or when the memory holds entries of another dtype.
  PreparedHardStep(Attention& attention, const OnlineMemory& memory);

  /// What a step decided (HardStepOutput without tensors).
  struct Output {
    core::ScanStatus status = core::ScanStatus::kNeedMoreInput;
    /// kChose: h_{t_i} [Dh], the chosen value row inside the memory's buffer (the context,
    /// with weight 1), valid until the memory is next extended, released or reset;
    /// kExhausted: Dh zeros (valid while this object lives); kNeedMoreInput: null.
    const T* context = nullptr;
    int64_t index = -1;              ///< t_i on kChose (the context's entry), else -1
    int64_t monotonic_energies = 0;  ///< energies evaluated by this call
  };

  /// One step from `state` (updated as hard_step_into updates it) with the query s_{i-1}:
  /// `query` points at Dq = options.query_dim values, which are not checked (a NaN energy
  /// chooses nothing). Throws mona::ArgumentError when the memory's dtype is not T or when
  /// the state resumes at an entry the memory has released.
  Output step(const T* query, HardState& state) const;

 private:
  const OnlineMemory& memory_;
  core::EnergyThreshold rule_;
  core::DotThresholdScanKernel<T> scan_;
  double scale_ = 1, offset_ = 0;  // e = scale * <query, key> + offset
  std::vector<T> zeros_;           // the context after the input is exhausted
};

template <class T>
typename PreparedHardStep<T>::Output PreparedHardStep<T>::step(const T* query, HardState& state) const {
  // The order of Attention::scan, which hard_step_into runs; the per-call checks left are
  // the two a growing stream can break between steps. Defined here, inline, so that a
  // decoding loop makes one call per step (the kernel's).
  Output out;
  const OnlineMemory& m = memory_;
  if (state.exhausted) {
    out.status = core::ScanStatus::kExhausted;
    out.context = zeros_.data();
    return out;
  }
  core::ScanResult r;
  if (m.size_ == 0) {
    r.status = m.finished_ ? core::ScanStatus::kExhausted : core::ScanStatus::kNeedMoreInput;
    r.index = 0;
  } else {
    constexpr at::ScalarType dtype = std::is_same_v<T, float> ? at::kFloat : at::kDouble;
    MONA_CHECK(m.dtype_ == dtype, "PreparedHardStep::step: memory: expected dtype ", dtype, ", got ", m.dtype_);
    MONA_CHECK(state.resume >= m.first() && state.resume <= m.size_, "PreparedHardStep::step: state: the scan resumes"
               " at memory entry ", state.resume, ", outside the entries the memory holds [", m.first(), ", ",
               m.size_, "]");
    const int64_t dk = m.key_dim_;
    r = scan_(query, static_cast<const T*>(m.keys_data_) + m.row(state.resume) * dk, dk, state.resume, m.size_,
              m.finished_, scale_, offset_, rule_);
  }
  out.monotonic_energies = r.inspected;
  out.status = r.status;
  switch (r.status) {
    case core::ScanStatus::kChose:
      out.index = r.index;
      out.context = static_cast<const T*>(m.values_data_) + m.row(r.index) * m.value_dim_;
      state.t = r.index;
      state.resume = r.index;
      break;
    case core::ScanStatus::kNeedMoreInput:
      state.resume = r.index;
      break;
    case core::ScanStatus::kExhausted:
      state.exhausted = true;
      out.context = zeros_.data();
      break;
  }
  return out;
}

/// Builds a mechanism by name: "soft", "monotonic", "mocha", "matcha", or the GMM family
/// of mona/nn/gmm_attention.h (a GmmAttention with options.gmm): "gmm" (003 eqs. 4-8,
/// nu_j = j + 1, no window: offline), "sagmm" (source aware, eqs. 9-12, no window:
/// offline), "sagmm-tr" (source aware, adaptive window of radius gmm.window_radius,
/// eqs. 14-16: streams) and "sagmm-fixed" (source aware, fixed window of width
/// gmm.window_width, eqs. 17-20: streams).
/// Throws mona::ArgumentError naming the mechanism (and listing the known ones) or the
/// invalid option.
std::shared_ptr<Attention> make_attention(const std::string& mechanism,
                                          const AttentionOptions& options);

/// One mechanism make_attention builds. mechanisms() is the one list of them: ModelOptions'
/// validation, the configuration's error messages and docs/attention.md's table read it (a
/// test compares that table with this one, and each entry's `online` with the built
/// module's is_online()).
struct MechanismInfo {
  const char* name;     ///< make_attention's and model.attention.type's name
  bool online;          ///< decodes while the input arrives (Attention::is_online)
  const char* options;  ///< the AttentionOptions fields it reads besides query/memory_dim, seed
  const char* paper;    ///< where it is defined (files of shared/papers)
};
/// Every mechanism, in the order the docs list them.
const std::vector<MechanismInfo>& mechanisms();
/// The mechanism called `name`, or null.
const MechanismInfo* find_mechanism(const std::string& name);
/// The names joined by ", " (for messages).
std::string mechanism_names();

}  // namespace mona::nn
