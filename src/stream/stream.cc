// The online runtime; see include/mona/stream/stream.h.
#include "mona/stream/stream.h"
#include "mona/core/error.h"
#include "mona/nn/gmm_attention.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

namespace mona::stream {

Recognizer::Recognizer(std::shared_ptr<nn::Seq2Seq> model, nn::SearchOptions search)
    : model_(std::move(model)), search_(search) {
  MONA_CHECK(model_ != nullptr, "Recognizer: model must not be null");
  search_.validate();
  model_->eval();
  audio_ = model_->options().input_kind == "audio";
}

std::unique_ptr<Stream> Recognizer::create_stream() const {
  std::unique_ptr<Stream> s(new Stream(search_));
  s->model_ = model_.get();
  s->search_.reset(*model_->decoder);
  if (audio_) s->fbank_ = std::make_unique<audio::OnlineFbank>(model_->options().features);
  return s;
}

void Recognizer::check_stream(const Stream& s, const char* fn) const {
  MONA_CHECK(s.model_ == model_.get(), fn, ": stream: created by a Recognizer of another model; a stream is "
             "advanced by a Recognizer of the model that created it (create_stream)");
}

void Recognizer::feed_frames(Stream& s, audio::Features frames) const {
  if (frames.num_frames == 0) return;
  const at::Tensor x = torch::from_blob(frames.data.data(), {frames.num_frames, frames.num_bins}, torch::kFloat);
  accept(s, x);
}

void Recognizer::accept_waveform(Stream& s, const float* samples, size_t n, int sample_rate) const {
  const char* fn = "Recognizer::accept_waveform";
  check_stream(s, fn);
  MONA_CHECK(audio_, fn, ": the model takes ", model_->options().input_kind, ", not audio");
  MONA_CHECK(!s.finished_, fn, ": input_finished() was already called for this stream");
  MONA_CHECK(sample_rate > 0, fn, ": sample_rate: expected > 0 Hz, got ", sample_rate);
  const audio::FbankOptions& features = model_->options().features;
  MONA_CHECK(int64_t{sample_rate} * audio::StreamResampler::kMaxUpsampling >= features.sample_rate, fn,
             ": sample_rate: expected at least 1/", audio::StreamResampler::kMaxUpsampling, " of the model's ",
             features.sample_rate, " Hz (the most a resampler raises a rate), got ", sample_rate, " Hz");
  MONA_CHECK(s.input_rate_ == 0 || s.input_rate_ == sample_rate, fn, ": sample_rate: this stream's samples came at ",
             s.input_rate_, " Hz, now ", sample_rate, " Hz; use one rate per stream");
  MONA_CHECK(n == 0 || samples != nullptr, fn, ": samples: null pointer for ", n, " samples");
  // Checked here too, before resampling, so that the index is the caller's.
  const float* bad = std::find_if(samples, samples + n, [](float x) { return !std::isfinite(x); });
  MONA_CHECK(bad == samples + n, fn, ": samples[", bad - samples, "] = ", *bad, ": expected finite samples");
  if (s.input_rate_ == 0) {
    s.input_rate_ = sample_rate;
    if (sample_rate != features.sample_rate) {
      s.resampler_ = std::make_unique<audio::StreamResampler>(sample_rate, features.sample_rate);
    }
  }
  if (s.resampler_) {
    const std::vector<float> resampled = s.resampler_->accept(samples, n);
    s.fbank_->accept_waveform(resampled.data(), resampled.size());
    s.samples_ += static_cast<int64_t>(resampled.size());
  } else {
    s.fbank_->accept_waveform(samples, n);
    s.samples_ += static_cast<int64_t>(n);
  }
  feed_frames(s, s.fbank_->take_frames());
}

// accept() runs the encoder's front end at once and leaves the rows it produces for the
// LSTM layers to decode() (one stream) or decode_streams() (several, batched); a
// bidirectional encoder, which cannot stream, runs whole at the end.
void Recognizer::accept(Stream& s, const at::Tensor& inputs) const {
  check_stream(s, "Recognizer::accept");
  MONA_CHECK(!s.finished_, "Recognizer::accept: input_finished() was already called for this stream");
  torch::NoGradGuard no_grad;
  take_rows(s, inputs, false);
  s.received_ += inputs.defined() && inputs.dim() > 0 ? inputs.size(0) : 0;
}

void Recognizer::take_rows(Stream& s, const at::Tensor& inputs, bool finished) const {
  nn::Encoder& encoder = *model_->encoder;
  if (model_->options().bidirectional) {
    const at::Tensor entries = encoder.stream(s.encoder_, inputs, finished);
    if (entries.size(0) > 0) model_->decoder->attention->extend(s.memory_, entries);
    return;
  }
  for (auto& row : encoder.stream_front_end(s.encoder_, inputs, finished)) s.pending_rows_.push_back(std::move(row));
}

void Recognizer::encode_pending(const std::vector<Stream*>& streams) const {
  torch::NoGradGuard no_grad;
  nn::Encoder& encoder = *model_->encoder;
  std::vector<Stream*> batch;
  std::vector<nn::EncoderStream*> states;
  std::vector<at::Tensor> rows;
  while (true) {  // one row of every stream that has one, as one batch
    batch.clear();
    states.clear();
    rows.clear();
    for (Stream* s : streams) {
      if (s->pending_rows_.empty()) continue;
      batch.push_back(s);
      states.push_back(&s->encoder_);
      rows.push_back(s->pending_rows_.front());
    }
    if (batch.empty()) break;
    const std::vector<at::Tensor> entries = encoder.stream_layers(states, rows);
    for (size_t k = 0; k < batch.size(); ++k) {
      batch[k]->pending_rows_.pop_front();
      if (entries[k].defined()) model_->decoder->attention->extend(batch[k]->memory_, entries[k]);
    }
  }
  for (Stream* s : streams) {
    if (s->finished_ && !s->memory_.finished()) finish_memory(*s);
  }
}

void Recognizer::finish_memory(Stream& s) const {
  if (model_->options().p_eos > 0) {
    nn::Attention& attention = *model_->decoder->attention;
    const at::Tensor frame = nn::eos_frame(attention.options().memory_dim,
                                           model_->parameters().front().options());
    attention.extend(s.memory_, frame);
  }
  s.memory_.finish();
}

void Recognizer::input_finished(Stream& s) const {
  check_stream(s, "Recognizer::input_finished");
  if (s.finished_) return;
  if (s.fbank_) {  // the resampler's tail, then the frames that waited for the end
    if (s.resampler_) {
      const std::vector<float> tail = s.resampler_->finish();
      s.fbank_->accept_waveform(tail.data(), tail.size());
      s.samples_ += static_cast<int64_t>(tail.size());
    }
    s.fbank_->input_finished();
    feed_frames(s, s.fbank_->take_frames());
  }
  torch::NoGradGuard no_grad;
  take_rows(s, at::Tensor(), true);
  s.finished_ = true;  // the memory is finished once the last rows are encoded
  if (s.pending_rows_.empty()) finish_memory(s);
}

bool Recognizer::is_ready(const Stream& s) const {
  check_stream(s, "Recognizer::is_ready");
  return !s.pending_rows_.empty() || (s.finished_ && !s.memory_.finished()) ||
         (!s.search_.done() && !s.search_.blocked_on(s.memory_));
}

void Recognizer::decode(Stream& s) const {
  check_stream(s, "Recognizer::decode");
  encode_pending({&s});
  s.search_.advance(*model_->decoder, s.memory_);
  s.memory_.release_before(s.search_.first_needed(*model_->decoder->attention, s.memory_));
}

void Recognizer::decode_streams(const std::vector<Stream*>& streams) const {
  for (size_t k = 0; k < streams.size(); ++k) {
    MONA_CHECK(streams[k] != nullptr, "Recognizer::decode_streams: streams[", k, "] is null");
    check_stream(*streams[k], "Recognizer::decode_streams");
    for (size_t j = 0; j < k; ++j) {
      MONA_CHECK(streams[j] != streams[k], "Recognizer::decode_streams: streams[", j, "] and streams[", k,
                 "] are the same stream");
    }
  }
  encode_pending(streams);
  for (Stream* s : streams) {
    while (is_ready(*s)) decode(*s);
  }
}

StreamResult Recognizer::result(const Stream& s) const {
  check_stream(s, "Recognizer::result");
  const nn::Hypothesis& h = s.search_.best();
  StreamResult r;
  r.tokens = h.tokens;
  r.memory_positions = h.positions;
  const nn::Encoder& encoder = *model_->encoder;
  // The last input position an entry can report: for symbols n = received_, which stands for
  // the appended </s> (one past the last input); for frames the last frame received (the
  // front end pads past it, so last_input_of can lie beyond).
  const bool frames = model_->options().input_kind != "symbols";
  const int64_t last_position = frames ? s.received_ - 1 : s.received_;
  const audio::FbankOptions& features = model_->options().features;
  const double received_ms = 1000.0 * static_cast<double>(s.samples_) / features.sample_rate;
  for (int64_t m : h.positions) {
    const int64_t f = m < 0 ? -1 : std::min<int64_t>(last_position, encoder.last_input_of(m));
    r.input_positions.push_back(f);
    // Audio: the end of frame f's window, in ms of the audio received.
    if (audio_) r.times_ms.push_back(f < 0 ? 0.0 : std::min(features.frame_end_ms(f), received_ms));
  }
  r.score = h.score;
  r.final = s.search_.done();
  return r;
}

void Recognizer::reset(Stream& s) const {
  check_stream(s, "Recognizer::reset");
  s.encoder_ = nn::EncoderStream();
  s.memory_.reset();
  s.search_.reset(*model_->decoder);
  s.received_ = 0;
  s.finished_ = false;
  s.pending_rows_.clear();
  if (s.fbank_) s.fbank_->reset();
  s.resampler_.reset();
  s.input_rate_ = 0;
  s.samples_ = 0;
}

StreamResult Recognizer::recognize(const at::Tensor& inputs) const {
  auto s = create_stream();
  accept(*s, inputs);
  input_finished(*s);
  while (is_ready(*s)) decode(*s);
  return result(*s);
}

StreamResult Recognizer::recognize_waveform(const std::vector<float>& samples, int sample_rate) const {
  auto s = create_stream();
  accept_waveform(*s, samples, sample_rate);
  input_finished(*s);
  while (is_ready(*s)) decode(*s);
  return result(*s);
}

}  // namespace mona::stream
