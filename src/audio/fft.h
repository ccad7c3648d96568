// src/audio/fft.h (internal): real-input FFTs of one size through FFTW (double precision).
// Plans are made once per size, with FFTW_ESTIMATE, under a process-wide mutex (FFTW's
// planner is not thread-safe) and kept for the life of the process; fftw_execute_dft_r2c,
// which each RealFft calls on its own buffers, is thread-safe.
#pragma once

#include <fftw3.h>

#include <cstdint>

namespace mona::audio::internal {

class RealFft {
 public:
  /// FFT of length n (n >= 2). Allocates aligned buffers: input() has n doubles,
  /// output() n/2 + 1 complex values.
  explicit RealFft(int64_t n);
  ~RealFft();
  RealFft(const RealFft&) = delete;
  RealFft& operator=(const RealFft&) = delete;

  double* input() { return in_; }
  const fftw_complex* output() const { return out_; }
  int64_t size() const { return n_; }
  /// output() = rfft(input()); input() is left unchanged.
  void execute();

 private:
  int64_t n_;
  fftw_plan plan_;
  double* in_;
  fftw_complex* out_;
};

}  // namespace mona::audio::internal
