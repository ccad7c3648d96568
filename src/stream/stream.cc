// The online runtime; see include/mona/stream/stream.h.
#include "mona/stream/stream.h"
#include "mona/core/error.h"

#include <torch/torch.h>

namespace mona::stream {

Recognizer::Recognizer(std::shared_ptr<nn::Seq2Seq> model, nn::SearchOptions search)
    : model_(std::move(model)), search_(search) {
  MONA_CHECK(model_ != nullptr, "Recognizer: model must not be null");
  search_.validate();
  model_->eval();
  subsampling_ = model_->encoder->subsampling();
}

std::unique_ptr<Stream> Recognizer::create_stream() const {
  std::unique_ptr<Stream> s(new Stream(search_));
  s->search_.reset(*model_->decoder);
  return s;
}

void Recognizer::accept(Stream& s, const at::Tensor& inputs) const {
  MONA_CHECK(!s.finished_, "Recognizer::accept: input_finished() was already called for this stream");
  torch::NoGradGuard no_grad;
  const at::Tensor entries = model_->encoder->stream(s.encoder_, inputs, false);
  if (entries.size(0) > 0) model_->decoder->attention->extend(s.memory_, entries);
  s.received_ += inputs.defined() && inputs.dim() > 0 ? inputs.size(0) : 0;
}

void Recognizer::input_finished(Stream& s) const {
  if (s.finished_) return;
  torch::NoGradGuard no_grad;
  const at::Tensor entries = model_->encoder->stream(s.encoder_, at::Tensor(), true);
  if (entries.size(0) > 0) model_->decoder->attention->extend(s.memory_, entries);
  s.memory_.finish();
  s.finished_ = true;
}

bool Recognizer::is_ready(const Stream& s) const {
  return !s.search_.done() && !s.search_.blocked_on(s.memory_);
}

void Recognizer::decode(Stream& s) const { s.search_.advance(*model_->decoder, s.memory_); }

StreamResult Recognizer::result(const Stream& s) const {
  const nn::Hypothesis& h = s.search_.best();
  StreamResult r;
  r.tokens = h.tokens;
  r.memory_positions = h.positions;
  for (int64_t m : h.positions) {
    // An entry past the input (the appended </s> of symbol models) reports `received`.
    r.input_positions.push_back(m < 0 ? -1 : std::min<int64_t>(s.received_, (m + 1) * subsampling_ - 1));
  }
  r.score = h.score;
  r.final = s.search_.done();
  return r;
}

void Recognizer::reset(Stream& s) const {
  s.encoder_ = nn::EncoderStream();
  s.memory_.reset();
  s.search_.reset(*model_->decoder);
  s.received_ = 0;
  s.finished_ = false;
}

StreamResult Recognizer::recognize(const at::Tensor& inputs) const {
  auto s = create_stream();
  accept(*s, inputs);
  input_finished(*s);
  while (is_ready(*s)) decode(*s);
  return result(*s);
}

}  // namespace mona::stream
