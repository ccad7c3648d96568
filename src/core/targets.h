// Internal: the instruction sets the hot core kernels are compiled for, and how a call
// reaches the version the CPU runs.
//
// The kernels of monotonic.cc, mocha.cc and matcha.cc are compiled once per target: CMake
// builds each of those files once with MONA_TARGET=baseline (x86-64 with SSE2, which every
// x86-64 CPU runs) and, with the option MONA_KERNEL_CLONES (on by default, x86-64 only),
// once more with MONA_TARGET=v3 (x86-64-v3: AVX2, FMA, every x86 CPU since about 2015).
// Each compilation puts its kernels in a namespace of its own, mona::core::target_baseline
// or mona::core::target_v3, between MONA_TARGET_BEGIN and MONA_TARGET_END, which also turn
// the v3 instruction set on for exactly that code (#pragma GCC target, after every #include,
// so inline functions of headers keep the baseline for their out-of-line copies and are
// compiled for v3 only where they are inlined into a v3 kernel). Everything a kernel
// inlines, OpenMP loop bodies included, is compiled for its target.
//
// The point is FMA: the alignment recurrences are chains of multiply-adds, and v3 does each
// in one instruction with one rounding instead of two; and AVX2 doubles the width of the
// vectorised loops (MoChA's chunk weights, the value checks). The two versions therefore
// differ by rounding, and the tests compare them with tolerances, never bit for bit.
//
// The public entry points (mona/core/monotonic.h, ...) are compiled once, in the baseline
// compilation (MONA_TARGET_ENTRY_POINTS), and call the selected version through
// MONA_TARGET_DISPATCH. The selection is made at the first call (cpu.cc): the best target
// the CPU runs, unless the environment variable MONA_KERNEL_TARGET names one
// ("baseline" or "x86-64-v3"), which is how `make test` runs the core suites on the
// baseline kernels on any machine (mona/core/cpu.h).
#pragma once

namespace mona::core::detail {

/// The compiled versions of the hot kernels.
enum class KernelTarget { kBaseline, kV3 };

/// The version every kernel call runs (see mona/core/cpu.h for the rule). Decided once;
/// throws mona::Error when MONA_KERNEL_TARGET is set to a name that is not a target or
/// one this CPU or build cannot run.
KernelTarget active_kernel_target();

}  // namespace mona::core::detail

// The rest is for the files compiled once per target, which CMake compiles with
// -DMONA_TARGET=baseline or -DMONA_TARGET=v3.
#if defined(MONA_TARGET)

// MONA_TARGET_NAMESPACE is this compilation's namespace; MONA_TARGET_ENTRY_POINTS is 1 in
// the baseline compilation, which also defines the public entry points.
#define MONA_TARGET_CAT2(a, b) a##b
#define MONA_TARGET_CAT(a, b) MONA_TARGET_CAT2(a, b)
#define MONA_TARGET_NAMESPACE MONA_TARGET_CAT(target_, MONA_TARGET)
#define MONA_TARGET_ID_baseline 0
#define MONA_TARGET_ID_v3 1
#define MONA_TARGET_ID MONA_TARGET_CAT(MONA_TARGET_ID_, MONA_TARGET)
#define MONA_TARGET_ENTRY_POINTS (MONA_TARGET_ID == 0)

#if MONA_TARGET_ID == 1
// The instruction sets of x86-64-v3 (as a list of ISA flags rather than "arch=", so that
// the baseline's inline functions may still be inlined into these kernels).
#define MONA_TARGET_BEGIN                                                                 \
  _Pragma("GCC push_options")                                                             \
  _Pragma("GCC target(\"avx,avx2,fma,bmi,bmi2,lzcnt,movbe,f16c,popcnt,sse3,ssse3,sse4.1,sse4.2\")") \
  namespace mona::core::MONA_TARGET_NAMESPACE {
#define MONA_TARGET_END \
  }                     \
  _Pragma("GCC pop_options")
#else
#define MONA_TARGET_BEGIN namespace mona::core::MONA_TARGET_NAMESPACE {
#define MONA_TARGET_END }
#endif

// Calls `kernel` (a name in the target namespaces, e.g. monotonic_alignment<T>) of the
// selected target with the remaining arguments. Used by the entry points only.
#if defined(MONA_KERNEL_CLONES)
#define MONA_TARGET_DISPATCH(kernel, ...)                                          \
  (::mona::core::detail::active_kernel_target() == ::mona::core::detail::KernelTarget::kV3 \
       ? ::mona::core::target_v3::kernel(__VA_ARGS__)                             \
       : ::mona::core::target_baseline::kernel(__VA_ARGS__))
#else
#define MONA_TARGET_DISPATCH(kernel, ...) \
  (::mona::core::detail::active_kernel_target(), ::mona::core::target_baseline::kernel(__VA_ARGS__))
#endif

#endif  // defined(MONA_TARGET)
