// mona/stream/stream.h: the online runtime. A Stream owns one utterance's buffered input,
// encoder state, growing memory and search state; a Recognizer (which holds the model
// and is not modified by decoding) advances streams:
//
//   auto stream = recognizer.create_stream();
//   recognizer.accept(*stream, inputs);       // symbols [n] int64, or frames [n, F]
//   while (recognizer.is_ready(*stream)) recognizer.decode(*stream);
//   ... more accept() / decode() ...
//   recognizer.input_finished(*stream);
//   while (recognizer.is_ready(*stream)) recognizer.decode(*stream);
//   StreamResult r = recognizer.result(*stream);   // tokens, and where each was emitted
//
// Offline decoding is exactly this sequence with all input accepted at once
// (Recognizer::recognize): one code path. The result does not depend on how the input is
// split into accept() calls, bit for bit (tokens, positions and score), on every CPU and
// BLAS: the encoder consumes one element at a time, each memory entry's attention keys
// are computed from that entry alone (Attention::extend), so every floating-point
// operation is the same whatever the split, and the search never recomputes a decision.
// (The batched training computation, Seq2Seq::loss and Encoder::forward, is other
// arithmetic: it agrees with the streamed one to float rounding, not bit for bit.)
//
// Emission positions: for each output token, the memory entry its attention chose
// (t_i; the last entry of the chunk for MoChA / MAtChA) and the input position it
// corresponds to (the same for symbol inputs; the last input frame of that entry's
// receptive field for the feature front end, which subsamples by nn::Encoder::subsampling(),
// capped at the last frame).
// Symbol models that append </s> (ModelOptions::append_eos) report position n, one past
// the last of n inputs, for tokens emitted while attending to that end marker. Soft
// attention emits only after the input is finished.
#pragma once

#include <memory>
#include <vector>

#include "mona/nn/search.h"
#include "mona/nn/seq2seq.h"

namespace mona::stream {

/// What has been recognised so far.
struct StreamResult {
  std::vector<int64_t> tokens;           ///< output token ids (no <s>, </s>)
  std::vector<int64_t> memory_positions; ///< chosen memory entry per token
  std::vector<int64_t> input_positions;  ///< corresponding input index per token
  double score = 0.0;                    ///< log-probability of the hypothesis
  bool final = false;                    ///< decoding has ended (</s> or length guard)
};

/// One utterance in flight. Create with Recognizer::create_stream.
class Stream {
 public:
  int64_t inputs_received() const { return received_; }
  bool input_finished() const { return finished_; }
  int64_t memory_size() const { return memory_.size(); }

 private:
  friend class Recognizer;
  explicit Stream(nn::SearchOptions search) : search_(search) {}
  nn::EncoderStream encoder_;
  nn::OnlineMemory memory_;
  nn::OnlineSearch search_;
  int64_t received_ = 0;
  bool finished_ = false;
};

/// Advances streams with a trained model (put in eval mode by the constructor).
class Recognizer {
 public:
  Recognizer(std::shared_ptr<nn::Seq2Seq> model, nn::SearchOptions search);
  std::unique_ptr<Stream> create_stream() const;
  /// Appends input: int64 symbol ids [n] or float frames [n, F]. Throws (naming the
  /// argument) on a finished stream or inputs of the wrong kind.
  void accept(Stream& stream, const at::Tensor& inputs) const;
  /// No more input for this utterance.
  void input_finished(Stream& stream) const;
  /// Whether decode() can make progress now.
  bool is_ready(const Stream& stream) const;
  /// Decodes as far as the input received so far allows.
  void decode(Stream& stream) const;
  StreamResult result(const Stream& stream) const;
  /// Clears the stream for a new utterance.
  void reset(Stream& stream) const;
  /// Offline: accept everything, finish, decode to the end.
  StreamResult recognize(const at::Tensor& inputs) const;
  const nn::Seq2Seq& model() const { return *model_; }

 private:
  std::shared_ptr<nn::Seq2Seq> model_;
  nn::SearchOptions search_;
  int64_t subsampling_ = 1;
};

}  // namespace mona::stream
