// mona/nn/seq2seq.h: attention-based sequence-to-sequence model (encoder, decoder, loss)
// with any mechanism of mona/nn/attention.h.
//
// Encoder (000 A.1, 002 D.1.2, simplified):
//   symbols  [B, T] int64  -> embedding [B, T, E]
//   features [B, T, F]     -> two 3x3 stride-2 Conv2d (32 channels), each with batch norm
//                             and ReLU, subsampling time (and frequency) by 4
//   optionally, with lookahead k > 0, each of those rows x_t is widened to
//   [x_t; x_{t+1}; ..; x_{t+k}] (zeros past the end), so that memory entry t has seen k
//   input elements beyond its own (the future-context window of streaming recognisers);
//   then a stack of single-layer LSTMs, unidirectional (online) or bidirectional (offline
//   baseline), each optionally followed by a linear projection; dropout between layers.
//   The LSTMs are torch::nn::LSTM modules (their parameters and checkpoint names); a
//   unidirectional one is computed by mona::nn::lstm_layer (mona/nn/lstm.h), one autograd
//   node per layer, and a bidirectional one by LibTorch over the packed batch.
//   The output is the memory h [B, T', Dh] with T' = T (symbols; T + 1 with the appended
//   </s>, ModelOptions::append_eos) or ceil(ceil(T/2)/2) (features, audio), halved
//   (rounding up) once more per time reduction layer (ModelOptions::time_reduction_layers).
//   Feature and audio frames are first normalised with a global mean and inverse standard
//   deviation held as buffers of the model (estimated on the training data by the trainer).
//
// Decoder (000 Algorithm 1 and A.1): with s_0 = 0 and y_0 = <s>,
//   c_i = Attend(s_{i-1}, h)                          (any mechanism; training: expected,
//                                                      Attention::unroll's steps)
//   s_i = LSTMCell([Embed(y_{i-1}); c_i], s_{i-1})   (torch::nn::LSTMCell's parameters,
//                                                      computed by mona::nn::lstm_cell; in
//                                                      training by UnrolledLstmCell)
//   logits_i = W_o [s_i; c_i] + b_o
//
// Loss: cross entropy with teacher forcing against y_1 .. y_U, </s>, averaged over target
// tokens, with optional uniform label smoothing and the localised label smoothing of
// 002 D.1.2 / 000 A.1 (the target at i is mixed with its neighbours at offsets -2, -1,
// +1, +2 with weights, e.g. 0.015, 0.035, 0.035, 0.015, then renormalised).
//
// Online use: the encoder and decoder have per-sequence streaming states (EncoderStream,
// DecoderState) used by mona/nn/search.h and mona/stream/stream.h. The streaming encoder
// always processes one input element at a time (LSTM) and computes each convolutional
// output frame from exactly its receptive field, so how the input is chunked never
// changes the result.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "mona/audio/fbank.h"
#include "mona/nn/attention.h"

namespace mona::nn {

/// The largest ModelOptions::lookahead (k input elements, each widening the LSTM's input).
constexpr int64_t kMaxLookahead = 1024;

/// Every hyperparameter of the model. Validate() names the field and value of a bad one:
/// sizes outside [1 or 0, kMaxModelSize], lookahead outside [0, kMaxLookahead].
struct ModelOptions {
  /// "symbols" (embedding) | "features" (frames [T, F] given by the caller, conv front
  /// end) | "audio" (the same front end on the log-mel filterbank frames that `features`
  /// describes, computed by mona from the waveform; feature_dim = features.num_bins())
  std::string input_kind = "symbols";
  /// audio: how frames are computed from samples (mona/audio/fbank.h); part of the model,
  /// since a model only works on the features it was trained on
  audio::FbankOptions features;
  int64_t input_vocab = 0;             ///< symbol vocabulary size (symbols)
  int64_t feature_dim = 0;             ///< F, features per frame (features)
  int64_t embedding_dim = 64;          ///< input embedding size (symbols)
  /// Symbols: append </s> to every input, so that the monotonic attention always has an
  /// entry to stop at for the outputs that follow the last input symbol (the end-of-input
  /// frame of 003 sec. 2.4, as a symbol). Streaming appends it at input_finished().
  bool append_eos = true;
  int64_t conv_channels = 32;          ///< front-end channels (features)
  int64_t encoder_layers = 2;
  int64_t encoder_hidden = 128;        ///< per direction
  bool bidirectional = false;          ///< offline baseline only: cannot stream
  /// k >= 0: each memory entry sees k input elements (symbols, or subsampled frames for
  /// features) beyond its own, so it becomes available k elements later when streaming;
  /// the LSTM input width grows to (k + 1) times the embedding / front-end width.
  /// Unidirectional encoders only (a bidirectional one already sees everything):
  /// validate() throws mona::ArgumentError naming the value for k < 0, k > kMaxLookahead, or
  /// k > 0 with bidirectional.
  /// Not from the papers: the fixed future-context window of streaming recognisers.
  int64_t lookahead = 0;
  int64_t projection_dim = 0;          ///< linear projection after each LSTM layer (0: none)
  /// Time reduction (002 sec. 4, TIMIT, and App. D.1.1; after Chan et al.): after each of the first
  /// n LSTM layers, every other element is skipped (elements 0, 2, 4, .. go on), so the
  /// memory is 2^n times shorter. 0 <= n < encoder_layers; unidirectional encoders only
  /// (validate() refuses n > 0 with bidirectional, naming n).
  int64_t time_reduction_layers = 0;
  int64_t output_vocab = 0;            ///< output vocabulary size (incl. specials)
  int64_t decoder_embedding_dim = 64;
  int64_t decoder_hidden = 128;
  double dropout = 0.0;                ///< between encoder layers and before the output layer
  /// The all-ones EOS frame of 003 sec. 2.4 (nn::append_eos_frame): in training, appended
  /// to the memory after a sequence's last entry with probability p_eos, and </s> is
  /// trained only on the sequences that received it; in evaluation and decoding (offline,
  /// the expected alignment, streaming at input_finished()) it is always appended, so
  /// </s> is expected only once the attention has reached the end of the input. 0: off.
  double p_eos = 0.0;
  /// Weight lambda of the auxiliary CTC loss on the encoder output (003 sec. 4.2, which uses
  /// 0.1 after Kim et al.'s joint CTC-attention training): a linear CTC head maps each
  /// memory entry (before the EOS frame) to output_vocab + 1 classes, the last one the CTC
  /// blank, and Seq2Seq::loss becomes (1 - lambda) * cross entropy + lambda * CTC, both per
  /// target token. The head is read in training only: decoding never uses it. 0: no head.
  /// Must lie in [0, 1).
  double ctc_weight = 0.0;
  /// soft | monotonic | mocha | matcha | gmm | sagmm | sagmm-tr | sagmm-fixed (make_attention)
  std::string attention = "mocha";
  AttentionOptions attention_options;  ///< query_dim / memory_dim are filled in by the model

  void validate() const;
};

/// Streaming state of the encoder for one sequence.
struct EncoderStream {
  std::vector<at::Tensor> h, c;  ///< per LSTM layer, [1, 1, H] (undefined before input)
  std::vector<at::Tensor> pending_inputs;    ///< bidirectional: everything, until finished
  /// features: the input frames the first conv layer still needs (frame raw_first on);
  /// older ones are dropped, so a stream holds O(1) frames however long it runs
  std::deque<at::Tensor> raw_frames;
  int64_t raw_first = 0, raw_total = 0;      ///< features: first frame held, frames received
  /// features: first conv layer outputs the second still needs (output conv1_first on)
  std::deque<at::Tensor> conv1_frames;
  int64_t conv1_first = 0, conv1_total = 0;  ///< features: first output held, outputs made
  std::vector<at::Tensor> lookahead_rows;    ///< lookahead: rows waiting for their k successors (at most k between calls)
  std::vector<int64_t> layer_outputs;        ///< time reduction: outputs of each reducing layer so far
  int64_t conv2_done = 0;                    ///< features: second conv layer outputs emitted
  bool finished = false;
};

/// The encoder (see header comment).
class Encoder : public torch::nn::Module {
 public:
  explicit Encoder(const ModelOptions& options);
  /// inputs [B, T] int64 symbols or [B, T, F] features; lengths [B] int64 ->
  /// memory [B, T', Dh] and its lengths [B]. Throws mona::ArgumentError naming the argument
  /// for another rank, F or dtype (frames: the model's), a symbol id outside [0, input_vocab)
  /// or, before lengths[b], one of the markers <pad>, <s>, </s> (data/tokens.h; the encoder
  /// appends </s> itself) (with its position and value), or lengths outside [0, T].
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& inputs, const at::Tensor& lengths);
  /// Streaming: feeds new inputs ([n] symbols or [n, F] frames) of one sequence; returns
  /// the new memory entries [m, Dh] (m may be 0). `finished` flushes what waits for
  /// right context (the last convolution frames, a bidirectional encoder's whole input).
  /// Throws mona::ArgumentError as forward() does for the inputs, for a NaN or infinite
  /// feature value (naming its frame and bin), in training mode (call eval() first), and
  /// for a stream that is already finished.
  at::Tensor stream(EncoderStream& state, const at::Tensor& inputs, bool finished);
  /// The first half of stream(): feeds inputs through the front end (embedding, or the
  /// convolutions of the frames whose receptive field is complete, and the lookahead
  /// widening) and returns the rows [D] ready for the LSTM layers, in order.
  std::vector<at::Tensor> stream_front_end(EncoderStream& state, const at::Tensor& inputs, bool finished);
  /// The second half, for several streams at once: row k [D] of streams[k] (its next front
  /// end row) goes through the LSTM layers with the other streams' rows as one batch (an
  /// LSTM step of batch S per layer; time reduction drops a stream's row at the layer where
  /// it is skipped). Returns per stream its new memory entry [Dh], or an undefined tensor
  /// when time reduction skipped the row. With one stream this is exactly what stream()
  /// computes; with several, each row's numbers agree with it to float rounding (a batch of
  /// S rows takes other matrix-product kernels than a single row). Unidirectional only.
  std::vector<at::Tensor> stream_layers(const std::vector<EncoderStream*>& streams,
                                        const std::vector<at::Tensor>& rows);
  int64_t output_dim() const { return output_dim_; }
  /// T' for an input of length T.
  int64_t output_length(int64_t T) const;
  /// Input elements per memory entry: 1 for symbols, 4 for features and audio (the front
  /// end's two stride-2 convolutions), times 2^time_reduction_layers.
  int64_t subsampling() const;
  /// The last input element that memory entry m has read (lookahead not counted): m for
  /// symbols; for frames, the end of the receptive field of the front-end output that entry
  /// m keeps. May lie past the input's end (the front end pads); callers cap it.
  int64_t last_input_of(int64_t m) const;
  /// Frames [.., F] -> (frames - feature_mean) * feature_inv_std: the global mean and
  /// variance normalisation of feature and audio models (identity until set).
  at::Tensor normalize(const at::Tensor& frames) const;
  /// Sets the normalisation (mean [F], inv_std [F]; saved with the model's buffers).
  /// Throws mona::ArgumentError naming the argument for a wrong size, a symbols model, or
  /// values that mona::audio::GlobalCmvn::from refuses (a non-finite mean, an inv_std not
  /// finite and > 0), naming the first such bin and its value.
  void set_normalization(const at::Tensor& mean, const at::Tensor& inv_std);
  /// The normalisation's mean [F] (undefined for a symbols model).
  const at::Tensor& feature_mean() const { return feature_mean_; }
  /// Where dropout draws its masks in training: null (the default) for LibTorch's global
  /// generator; data-parallel training gives each replica its own (mona/train/trainer.h),
  /// so that no two threads share one. Not owned.
  at::Generator* dropout_generator = nullptr;

 private:
  at::Tensor run_layers(at::Tensor x, const at::Tensor& lengths);
  /// [B, T, D] rows with lengths -> [B, T, (k + 1) D], row t = [x_t; ..; x_{t+k}], zeros
  /// at and past each sequence's length (ModelOptions::lookahead = k).
  at::Tensor widen(const at::Tensor& x, const at::Tensor& lengths) const;
  at::Tensor conv1_frame(const EncoderStream& s, int64_t k, int64_t T);
  at::Tensor conv2_frame(const EncoderStream& s, int64_t m, int64_t T1);
  ModelOptions options_;
  torch::nn::Embedding embedding{nullptr};
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  at::Tensor feature_mean_, feature_inv_std_;  // buffers "feature_mean", "feature_inv_std" [F]
  std::vector<torch::nn::LSTM> lstms_;
  std::vector<torch::nn::Linear> projections_;
  int64_t output_dim_ = 0;
};

/// Decoder state of one hypothesis (online decoding).
struct DecoderState {
  at::Tensor h, c;       ///< LSTM cell state [1, H]
  HardState attention;   ///< where the hard attention stands
};

/// Result of one online decoder step.
struct DecoderStep {
  core::ScanStatus status = core::ScanStatus::kNeedMoreInput;
  at::Tensor log_probs;  ///< [V] log-softmax of the output layer (unless kNeedMoreInput)
  HardStepOutput attention;
  DecoderState next;     ///< state after the step (unless kNeedMoreInput)
};

/// The decoder (see header comment).
class Decoder : public torch::nn::Module {
 public:
  Decoder(const ModelOptions& options, int64_t memory_dim);
  /// Teacher forcing: previous tokens y_in [B, U] (<s> then y_1 .. y_{U-1}) against the
  /// prepared memory -> logits [B, U, V] and attention weights [B, U, T]. `states`, if
  /// given, receives the attention states after each step stacked on dim 1 ([B, U, T] for
  /// the monotonic mechanisms, mu [B, U, H] for the GMM family; undefined for soft).
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& y_in, const Memory& memory,
                                            at::Tensor* states = nullptr);
  /// Expected-attention (training computation, no teacher forcing) step for one
  /// hypothesis over a whole prepared memory with B = 1: used to decode with the soft
  /// expected alignment. `alignment` is the attention state, passed through unread:
  /// alpha [1, T] for the monotonic mechanisms, mu [1, H] for the GMM family.
  at::Tensor expected_step(int64_t y_prev, at::Tensor& h, at::Tensor& c, at::Tensor& alignment,
                           const Memory& memory, at::Tensor* weights = nullptr);
  /// Online step of one hypothesis: hard attention over the stream's memory so far.
  DecoderStep hard_step(int64_t y_prev, const DecoderState& state, const OnlineMemory& memory);
  DecoderState initial_state() const;

  std::shared_ptr<Attention> attention;
  /// As Encoder::dropout_generator, for the dropout before the output layer.
  at::Generator* dropout_generator = nullptr;

 private:
  /// Logits of decoder states h [..., Hd] with contexts [..., Dh] -> [..., V] (any leading
  /// shape: forward() applies it to all steps at once).
  at::Tensor output_logits(const at::Tensor& h, const at::Tensor& context);
  ModelOptions options_;
  torch::nn::Embedding embedding{nullptr};
  torch::nn::LSTMCell cell{nullptr};
  torch::nn::Linear output{nullptr};
};

/// Label smoothing of the training loss.
struct SmoothingOptions {
  double uniform = 0.0;  ///< epsilon of uniform label smoothing
  /// Localised label smoothing weights for neighbours at offsets -2, -1, +1, +2
  /// (002 D.1.2 uses 0.015, 0.035, 0.035, 0.015); empty: none.
  std::vector<double> localized;
  /// Throws mona::ArgumentError ("SmoothingOptions: <field>: ...", with the value) unless
  /// uniform lies in [0, 1) and localized is empty or 4 finite weights >= 0.
  void validate() const;
};

/// Length penalty of 003 eq. 13 for GMM-family attention (mona/nn/gmm_attention.h,
/// gmm_length_penalty): per sequence, with I = target length + 1 (the </s> step),
/// J = memory length and m = min(I, J),
///   L[b] = lambda * sum_h ((mu_h(I-1) - m)^2 + (nu_{h,J-1} - m)^2)
/// (one nu per head: SAGMM's heads have their own positions; plain GMM's nu_{J-1} = J is a
/// constant). Seq2Seq::loss adds mean_b L[b] to the mean cross entropy while step <
/// until_step (003: lambda = 5e-4, off after 200k steps). A no-op for other mechanisms.
struct LengthPenaltyOptions {
  double lambda = 5e-4;         ///< >= 0
  int64_t until_step = 200000;  ///< the penalty is off from this training step on (< 0: never)
  int64_t step = 0;             ///< current training step (the caller's counter)
};

/// The whole batch's sizes, for a loss call that sees one shard of it (data-parallel
/// training, mona/train/trainer.h): the shard's cross entropy is divided by the batch's
/// target tokens and its length penalty by the batch's sequences, so that the shards'
/// losses (and gradients) add up to those of the batch.
struct BatchTotals {
  int64_t tokens = 0;     ///< target tokens of the whole batch, </s> included: sum (U_b + 1)
  int64_t sequences = 0;  ///< sequences of the whole batch
};

/// The two terms of Seq2Seq::loss, each per target token of the batch (divided as the loss
/// is, so shards' terms add up too): the cross entropy (with smoothing) and, with a CTC
/// head (ModelOptions::ctc_weight > 0), the CTC negative log-likelihood (undefined
/// otherwise). The loss is (1 - lambda) * cross_entropy + lambda * ctc, plus the length
/// penalty. Both are graph tensors (scalars).
struct LossTerms {
  at::Tensor cross_entropy, ctc;
};

/// Encoder + decoder.
class Seq2Seq : public torch::nn::Module {
 public:
  explicit Seq2Seq(ModelOptions options);
  /// Teacher-forced loss: inputs/lengths as Encoder::forward; targets [B, U] int64 without
  /// <s> and </s>, padded, with target_lengths [B]. Returns the mean cross entropy per
  /// target token (including </s>); `weights` receives the attention [B, U+1, T'] if given.
  /// With `length_penalty` and a GMM-family attention, adds the length penalty (see
  /// LengthPenaltyOptions); ignored for other mechanisms. With `totals` (this call sees one
  /// shard of a batch), the sums are divided by the batch's counts instead of the shard's
  /// (BatchTotals). `tokens` receives the shard's target token count. Throws
  /// mona::ArgumentError on shapes, lengths or options that do not fit, on target ids as
  /// Encoder::forward refuses input ids (outside [0, output_vocab), or a marker <pad>, <s>,
  /// </s> before target_lengths[b]), and when `totals` holds fewer tokens or sequences than
  /// this shard.
  /// With ModelOptions::p_eos > 0, the EOS frame is appended as encode() does, and the
  /// </s> position of a sequence without it adds nothing to the loss (it still counts in
  /// the token total, so that shards' losses add up to the batch's).
  /// With ModelOptions::ctc_weight = lambda > 0, adds the CTC term on the encoder's memory
  /// (before the EOS frame): sum_b -log P_ctc(y_b | h_b) over the token divisor, each
  /// sequence's lattice over its own memory length (Graves et al. 2006, as LibTorch's
  /// ctc_loss computes it). A sequence whose memory is too short for its targets (fewer
  /// entries than U_b plus its repeated neighbours) has no CTC path: its CTC term and
  /// gradient are 0 (zero_infinity), its cross entropy is trained as usual. `terms`
  /// receives both terms (LossTerms) if given.
  at::Tensor loss(const at::Tensor& inputs, const at::Tensor& lengths, const at::Tensor& targets,
                  const at::Tensor& target_lengths, const SmoothingOptions& smoothing,
                  at::Tensor* weights = nullptr, int64_t* tokens = nullptr,
                  const LengthPenaltyOptions* length_penalty = nullptr,
                  const BatchTotals* totals = nullptr, LossTerms* terms = nullptr);
  /// The memory the decoder attends to: Encoder::forward(inputs, lengths) -> (memory
  /// [B, T', Dh], lengths [B]), with the EOS frame of ModelOptions::p_eos appended (in
  /// training with probability p_eos, drawn from the decoder's dropout generator, else to
  /// every sequence; T' grows by one). `appended` receives [B] bool: which sequences got it
  /// (left untouched when p_eos = 0). Throws what Encoder::forward throws for the inputs.
  std::pair<at::Tensor, at::Tensor> encode(const at::Tensor& inputs, const at::Tensor& lengths,
                                           at::Tensor* appended = nullptr);
  const ModelOptions& options() const { return options_; }

  std::shared_ptr<Encoder> encoder;
  std::shared_ptr<Decoder> decoder;
  /// The CTC head (ModelOptions::ctc_weight > 0; else empty): memory entry [Dh] ->
  /// logits [output_vocab + 1], the blank last. Registered as "ctc_output".
  torch::nn::Linear ctc_output{nullptr};

 private:
  /// encode()'s second half: the EOS frame appended to the encoder's memory.
  std::pair<at::Tensor, at::Tensor> with_eos_frame(at::Tensor memory, at::Tensor lengths, at::Tensor* appended);
  ModelOptions options_;
};

}  // namespace mona::nn
