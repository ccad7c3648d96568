// Internal: subnormal floating-point values flushed to zero while a kernel runs.
//
// An x86 operation whose input or result is subnormal (magnitude below FLT_MIN = 1.2e-38 in
// float, DBL_MIN = 2.2e-308 in double) costs on Intel CPUs about a hundred cycles of microcode
// instead of a few. MoChA's and MAtChA's kernels meet many in the late stage of training,
// where energies spread out and exp(u_l - u_j) falls below FLT_MIN, and MAtChA's in long
// products of (1 - p); the expected alignment's q decays along such products too, and its
// alpha rows are stored as float. Measured on an Intel Xeon (Emerald Rapids), float forward
// + backward, one thread: MoChA at [32, 100, 500] with u ~ N(0, 30^2) 49.7-55.9 ms,
// 13.6-15.1 ms with them flushed; MAtChA 5-8x; the expected alignment at [8, 50, 2000] with
// "hard" p (bench/train) 2.17-2.24 ms, 1.79-1.85 ms flushed (bench/notes.md, "Subnormal
// numbers"). AMD's Zen cores take such operations at nearly full speed, which hid it on the
// machines measured before.
//
// FlushSubnormals sets the calling thread's MXCSR to flush subnormal results to zero (FTZ)
// and to read subnormal inputs as zero (DAZ), and restores the register when it goes out of
// scope. A kernel declares one inside its OpenMP region or loop body (each thread has its
// own register), around its own arithmetic. A result then differs from the unflushed one by
// less than FLT_MIN (DBL_MIN) absolute per operation.
#pragma once

#if defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>
#endif

namespace mona::core::detail {

class FlushSubnormals {
 public:
#if defined(__x86_64__) || defined(_M_X64)
  FlushSubnormals() : saved_(_mm_getcsr()) {
    _mm_setcsr(saved_ | kFlushToZero | kDenormalsAreZero);
  }
  ~FlushSubnormals() { _mm_setcsr(saved_); }
#endif
  FlushSubnormals(const FlushSubnormals&) = delete;
  FlushSubnormals& operator=(const FlushSubnormals&) = delete;

 private:
#if defined(__x86_64__) || defined(_M_X64)
  static constexpr unsigned kFlushToZero = 0x8000, kDenormalsAreZero = 0x0040;
  unsigned saved_;
#endif
};

}  // namespace mona::core::detail
