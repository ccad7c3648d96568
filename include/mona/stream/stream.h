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
// (The exception is a search whose rule asks whether the input has finished,
// SearchOptions::eos_only_after_input and eos_only_at_last_entry, nn/search.h.) (The batched training computation, Seq2Seq::loss and Encoder::forward, is other
// arithmetic: it agrees with the streamed one to float rounding, not bit for bit.)
//
// Emission positions: for each output token, the memory entry its attention chose
// (t_i; the last entry of the chunk for MoChA / MAtChA) and the input position it
// corresponds to (the same for symbol inputs; the last input frame of that entry's
// receptive field for the feature front end, which subsamples by nn::Encoder::subsampling(),
// capped at the last frame received: nn::Encoder::last_input_of capped at
// Stream::inputs_received() - 1).
// Symbol models that append </s> (ModelOptions::append_eos) report position n, one past
// the last of n inputs, for tokens emitted while attending to that end marker. Soft
// attention emits only after the input is finished. A model trained with 003's EOS frame
// (ModelOptions::p_eos) gets that frame appended to its memory at input_finished(); a
// token emitted at it reports the last input position.
//
// Audio (models with ModelOptions::input_kind "audio"): accept_waveform() takes samples
// at any rate, resamples them to the model's rate (audio::StreamResampler), computes the
// log-mel frames as they complete (audio::OnlineFbank; the model normalises them) and
// feeds them to the encoder, so the result is that of accept() with the frames of the
// whole waveform. Each token's time (StreamResult::times_ms) is the end, in milliseconds
// of audio, of the last frame its memory entry has read (its input position;
// audio::FbankOptions::frame_end_ms), capped at the audio received
// (Stream::samples_received(): the frames of snip_edges false reach past the end).
//
// Bounded memory: after each decode() the runtime releases the memory entries that no
// live hypothesis can read again (nn::OnlineSearch::first_needed over
// nn::Attention::first_needed: before the scan's position for hard monotonic attention,
// w - 1 entries before it for MoChA, before t_{i-1} for MAtChA), and the encoder keeps only
// the frames its convolutions still need, so a stream of any length runs in bounded memory
// with hard monotonic attention and MoChA, with MAtChA while it keeps choosing (a scan that
// never stops keeps the entries since t_{i-1}: its chunk starts there), with SAGMM-tr's
// fixed window ("sagmm-fixed": before gamma_{i-1} - (c-1)/2)
// and with its adaptive window ("sagmm-tr") when the variance is bounded
// (gmm.max_variance > 0: before mu_{i-1} - r sqrt(max_variance)), Stream::memory_held
// counting the entries. Soft attention, GMM and SAGMM keep the whole memory (a step may read
// any entry), and so does sagmm-tr without max_variance: its window's lower edge
// mu - r sigma could move back without limit.
//
// accept() computes the encoder's front end at once and queues its rows; decode() runs the
// queued rows through the LSTM layers before searching, and decode_streams() does that for
// several streams with one batched LSTM step per layer (many concurrent streams).
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "mona/audio/fbank.h"
#include "mona/audio/resample.h"
#include "mona/nn/search.h"
#include "mona/nn/seq2seq.h"

namespace mona::stream {

/// What has been recognised so far.
struct StreamResult {
  std::vector<int64_t> tokens;           ///< output token ids (no <s>, </s>)
  std::vector<int64_t> memory_positions; ///< chosen memory entry per token
  /// corresponding input index per token (see the header comment: symbols n stands for the
  /// appended </s>; frames are capped at the last frame received; -1 for none)
  std::vector<int64_t> input_positions;
  /// audio models: per token, the end of the last frame its entry has read, in ms of audio
  /// (audio::FbankOptions::frame_end_ms of its input position, capped at the audio
  /// received; 0 for a token with no input position)
  std::vector<double> times_ms;
  double score = 0.0;                    ///< log-probability of the hypothesis
  bool final = false;                    ///< decoding has ended (</s> or length guard)
};

/// One utterance in flight. Create with Recognizer::create_stream.
class Stream {
 public:
  int64_t inputs_received() const { return received_; }
  bool input_finished() const { return finished_; }
  int64_t memory_size() const { return memory_.size(); }
  /// Memory entries stored now (what bounded-memory decoding keeps small).
  int64_t memory_held() const { return memory_.held(); }
  /// The first memory entry still readable (entries before it are released).
  int64_t memory_first() const { return memory_.first(); }
  /// Input frames and first-layer outputs the encoder's convolutions hold now.
  int64_t frames_held() const {
    return static_cast<int64_t>(encoder_.raw_frames.size() + encoder_.conv1_frames.size());
  }
  /// Audio: samples received at the model's rate (after resampling).
  int64_t samples_received() const { return samples_; }

 private:
  friend class Recognizer;
  explicit Stream(nn::SearchOptions search) : search_(search) {}
  nn::EncoderStream encoder_;
  nn::OnlineMemory memory_;
  nn::OnlineSearch search_;
  int64_t received_ = 0;
  bool finished_ = false;
  std::deque<at::Tensor> pending_rows_;  // front-end rows waiting for the encoder's LSTM layers
  // Audio models: the feature computation and, for another input rate, the resampler.
  std::unique_ptr<audio::OnlineFbank> fbank_;
  std::unique_ptr<audio::StreamResampler> resampler_;
  int input_rate_ = 0;   // rate of the samples given to accept_waveform (0: none yet)
  int64_t samples_ = 0;  // samples at the model's rate
  const nn::Seq2Seq* model_ = nullptr;  // the model of the Recognizer that created it
};

/// Advances streams with a trained model (put in eval mode by the constructor). A stream is
/// advanced by a Recognizer of the model that created it: every call taking a stream throws
/// mona::ArgumentError for one created with another model (its state has that model's
/// sizes).
class Recognizer {
 public:
  /// An audio model's frames are computed as its ModelOptions::features say.
  Recognizer(std::shared_ptr<nn::Seq2Seq> model, nn::SearchOptions search);
  std::unique_ptr<Stream> create_stream() const;
  /// Appends input: int64 symbol ids [n] or float frames [n, F] (features and audio
  /// models; for audio, log-mel frames as audio::compute_fbank makes them). Throws (naming
  /// the argument) on a finished stream or inputs of the wrong kind, and for symbol ids as
  /// nn::Encoder::stream does (outside the vocabulary, or a marker <pad>, <s>, </s>).
  void accept(Stream& stream, const at::Tensor& inputs) const;
  /// Audio models: appends n mono samples in [-1, 1] at `sample_rate` Hz (resampled to the
  /// model's rate when different; every call of a stream must give the same rate). Any
  /// chunking gives the result of the whole waveform at once. Throws mona::ArgumentError
  /// naming the argument for a model that does not take audio, a finished stream, a
  /// sample_rate <= 0, below 1/256 of the model's (audio::StreamResampler::kMaxUpsampling)
  /// or changed within the stream, or a NaN or infinite sample.
  void accept_waveform(Stream& stream, const float* samples, size_t n, int sample_rate) const;
  void accept_waveform(Stream& stream, const std::vector<float>& samples, int sample_rate) const {
    accept_waveform(stream, samples.data(), samples.size(), sample_rate);
  }
  /// No more input for this utterance.
  void input_finished(Stream& stream) const;
  /// Whether decode() can make progress now.
  bool is_ready(const Stream& stream) const;
  /// Decodes as far as the input received so far allows: runs the encoder over the input
  /// accepted since the last call, then the search.
  void decode(Stream& stream) const;
  /// Advances several streams together (the shape of a server holding many connections):
  /// the encoder runs over the input every stream accepted, one element of each stream per
  /// batched LSTM step (nn::Encoder::stream_layers), then each stream is decoded as far as
  /// it can be (decode() while is_ready()). The streams must be distinct (mona::ArgumentError
  /// naming the indices otherwise). A stream's result equals decoding it alone up to float
  /// rounding (a batch of rows takes other matrix-product kernels than one row): the same
  /// tokens unless two choices were within rounding of each other.
  void decode_streams(const std::vector<Stream*>& streams) const;
  StreamResult result(const Stream& stream) const;
  /// Clears the stream for a new utterance.
  void reset(Stream& stream) const;
  /// Offline: accept everything, finish, decode to the end.
  StreamResult recognize(const at::Tensor& inputs) const;
  /// Offline, audio models: accept_waveform(all of it), finish, decode to the end.
  StreamResult recognize_waveform(const std::vector<float>& samples, int sample_rate) const;
  const nn::Seq2Seq& model() const { return *model_; }
  bool takes_audio() const { return audio_; }

 private:
  void feed_frames(Stream& stream, audio::Features frames) const;
  // Throws mona::ArgumentError, naming `fn`, unless this Recognizer's model created `stream`.
  void check_stream(const Stream& stream, const char* fn) const;
  // Front end of new input: rows queued for the LSTM layers (or, bidirectional, the whole
  // encoder at the end).
  void take_rows(Stream& stream, const at::Tensor& inputs, bool finished) const;
  // Runs the queued rows of `streams` through the LSTM layers, batched across streams, and
  // extends their memories; finishes the memory of finished streams.
  void encode_pending(const std::vector<Stream*>& streams) const;
  // Marks the memory of a stream whose input is finished and encoded as finished, after
  // appending the EOS frame when the model was trained with one (ModelOptions::p_eos).
  void finish_memory(Stream& stream) const;
  std::shared_ptr<nn::Seq2Seq> model_;
  nn::SearchOptions search_;
  bool audio_ = false;
};

}  // namespace mona::stream
