// Which compiled version of the hot core kernels runs on this machine.
#pragma once

namespace mona::core {

/// The instruction set the hot kernels (monotonic.h, mocha.h, matcha.h, additive_energy.h,
/// attention_context.h, lstm.h, and the online step's dot products and scan in scan.h) run
/// with: "x86-64-v4 (AVX-512)", "x86-64-v3 (AVX2, FMA)" or
/// "baseline" (x86-64 with SSE2).
///
/// The library compiles those kernels for the baseline and, with the CMake option
/// MONA_KERNEL_CLONES (on by default, x86-64 with GCC or Clang), also for x86-64-v3 and
/// x86-64-v4. At the first kernel call the best version the CPU runs is chosen, unless the
/// environment variable MONA_KERNEL_TARGET names one: "baseline", "x86-64-v3" or
/// "x86-64-v4" (an empty value counts as unset). `make test` uses it to run the core suites on the baseline kernels on any
/// machine, so that an assertion that holds only for one version fails on the developer's
/// own machine. The versions differ only by rounding (fused multiply-adds, the width of
/// partial sums).
///
/// Throws mona::Error, naming the variable and its value, when MONA_KERNEL_TARGET is not
/// one of those names or names a version this CPU or this build cannot run; the kernels
/// compiled per version then throw the same error at every call (kernels with one version,
/// such as the masked softmax, run as usual).
const char* kernel_target();

}  // namespace mona::core
