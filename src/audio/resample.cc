// Sample-rate conversion with libsoxr (mona/audio/resample.h).
#include "mona/audio/resample.h"

#include <soxr.h>

#include <cmath>

#include "mona/core/error.h"

namespace mona::audio {

struct StreamResampler::Impl {
  soxr_t soxr = nullptr;
  std::vector<float> block;  // input waiting for a whole kBlock
  bool finished = false;
  ~Impl() {
    if (soxr != nullptr) soxr_delete(soxr);
  }
};

namespace {

soxr_t make_soxr(int from_rate, int to_rate) {
  const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  const soxr_quality_spec_t quality = soxr_quality_spec(SOXR_HQ, 0);
  const soxr_runtime_spec_t runtime = soxr_runtime_spec(1);  // one thread: deterministic
  soxr_error_t err = nullptr;
  soxr_t s = soxr_create(from_rate, to_rate, 1, &err, &io, &quality, &runtime);
  if (err != nullptr || s == nullptr) {
    if (s != nullptr) soxr_delete(s);
    detail::fail_data("StreamResampler: libsoxr cannot convert ", from_rate, " Hz to ", to_rate,
                      " Hz: ", err != nullptr ? err : "unknown error");
  }
  return s;
}

}  // namespace

StreamResampler::StreamResampler(int from_rate, int to_rate)
    : from_rate_(from_rate), to_rate_(to_rate), impl_(std::make_unique<Impl>()) {
  MONA_CHECK(from_rate > 0, "StreamResampler: from_rate: expected > 0 Hz, got ", from_rate);
  MONA_CHECK(to_rate > 0, "StreamResampler: to_rate: expected > 0 Hz, got ", to_rate);
  // Each block's output buffer is kBlock * to_rate / from_rate samples: 1 Hz to 1 MHz
  // asked for 4 GB and ran for minutes.
  MONA_CHECK(static_cast<int64_t>(to_rate) <= kMaxUpsampling * static_cast<int64_t>(from_rate),
             "StreamResampler: ", from_rate, " Hz to ", to_rate, " Hz: expected at most ", kMaxUpsampling,
             " times the rate (no audio needs more)");
  impl_->soxr = make_soxr(from_rate, to_rate);
  impl_->block.reserve(kBlock);
}

StreamResampler::~StreamResampler() = default;
StreamResampler::StreamResampler(StreamResampler&&) noexcept = default;
StreamResampler& StreamResampler::operator=(StreamResampler&&) noexcept = default;

// Hands libsoxr `n` input samples (nullptr: the end of the input) and collects all the
// output it gives for them. The calls made depend only on n, never on the caller's chunks.
void StreamResampler::run_block(const float* in, size_t n, std::vector<float>& out) {
  const double ratio = static_cast<double>(to_rate_) / from_rate_;
  const size_t room = static_cast<size_t>(std::ceil(static_cast<double>(kBlock) * ratio)) + 64;
  std::vector<float> buf(room);
  size_t consumed = 0;
  for (;;) {
    size_t idone = 0, odone = 0;
    const soxr_error_t err =
        soxr_process(impl_->soxr, in != nullptr ? in + consumed : nullptr, n - consumed, &idone,
                     buf.data(), room, &odone);
    if (err != nullptr) detail::fail_data("StreamResampler: libsoxr failed: ", err);
    out.insert(out.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(odone));
    consumed += idone;
    // Input consumed and the output buffer not filled: libsoxr has nothing more now.
    if (consumed >= n && odone < room) break;
    if (idone == 0 && odone == 0) {
      ::mona::detail::fail_data("StreamResampler: libsoxr took none of ", n - consumed,
                                " samples and gave no output");
    }
  }
}

std::vector<float> StreamResampler::accept(const float* samples, size_t n) {
  MONA_CHECK(!impl_->finished, "StreamResampler::accept: called after finish(); call reset()");
  std::vector<float> out;
  if (n == 0) return out;
  MONA_CHECK(samples != nullptr, "StreamResampler::accept: samples is null with n = ", n);
  std::vector<float>& block = impl_->block;
  size_t i = 0;
  while (i < n) {
    const size_t take = std::min(kBlock - block.size(), n - i);
    block.insert(block.end(), samples + i, samples + i + take);
    i += take;
    if (block.size() == kBlock) {
      run_block(block.data(), block.size(), out);
      block.clear();
    }
  }
  return out;
}

std::vector<float> StreamResampler::finish() {
  MONA_CHECK(!impl_->finished, "StreamResampler::finish: called twice; call reset()");
  std::vector<float> out;
  if (!impl_->block.empty()) run_block(impl_->block.data(), impl_->block.size(), out);
  impl_->block.clear();
  run_block(nullptr, 0, out);  // flush the filter
  impl_->finished = true;
  return out;
}

void StreamResampler::reset() {
  const soxr_error_t err = soxr_clear(impl_->soxr);
  if (err != nullptr) detail::fail_data("StreamResampler::reset: libsoxr failed: ", err);
  impl_->block.clear();
  impl_->finished = false;
}

std::vector<float> resample(const std::vector<float>& samples, int from_rate, int to_rate) {
  MONA_CHECK(from_rate > 0, "resample: from_rate: expected > 0 Hz, got ", from_rate);
  MONA_CHECK(to_rate > 0, "resample: to_rate: expected > 0 Hz, got ", to_rate);
  if (from_rate == to_rate) return samples;
  StreamResampler r(from_rate, to_rate);
  std::vector<float> out = r.accept(samples.data(), samples.size());
  const std::vector<float> tail = r.finish();
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

}  // namespace mona::audio
