// The FFTW plan cache of src/audio/fft.h.
#include "fft.h"

#include <map>
#include <mutex>

#include "mona/core/error.h"

namespace mona::audio::internal {
namespace {

std::mutex& planner_mutex() {
  static std::mutex m;
  return m;
}

// One plan per size, never destroyed (plans are small and sizes few). Made on buffers
// from fftw_alloc_*, as every buffer it is executed on, so their alignment agrees.
fftw_plan plan_for(int64_t n) {
  static std::map<int64_t, fftw_plan>* plans = new std::map<int64_t, fftw_plan>();
  auto it = plans->find(n);
  if (it != plans->end()) return it->second;
  double* in = fftw_alloc_real(static_cast<size_t>(n));
  fftw_complex* out = fftw_alloc_complex(static_cast<size_t>(n / 2 + 1));
  fftw_plan p = fftw_plan_dft_r2c_1d(static_cast<int>(n), in, out, FFTW_ESTIMATE);
  fftw_free(in);
  fftw_free(out);
  if (p == nullptr) ::mona::detail::fail("RealFft: FFTW could not plan an FFT of length ", n);
  plans->emplace(n, p);
  return p;
}

}  // namespace

RealFft::RealFft(int64_t n) : n_(n) {
  MONA_CHECK(n >= 2 && n <= (int64_t{1} << 30), "RealFft: n: expected [2, 2^30], got ", n);
  std::lock_guard<std::mutex> lock(planner_mutex());
  plan_ = plan_for(n);
  in_ = fftw_alloc_real(static_cast<size_t>(n));
  out_ = fftw_alloc_complex(static_cast<size_t>(n / 2 + 1));
  if (in_ == nullptr || out_ == nullptr) {
    fftw_free(in_);
    fftw_free(out_);
    throw std::bad_alloc();
  }
  for (int64_t i = 0; i < n; ++i) in_[i] = 0.0;
}

RealFft::~RealFft() {
  fftw_free(in_);
  fftw_free(out_);
}

void RealFft::execute() { fftw_execute_dft_r2c(plan_, in_, out_); }

}  // namespace mona::audio::internal
