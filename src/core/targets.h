// Internal: the instruction sets the hot core kernels are compiled for, and how a call
// reaches the version the CPU runs.
//
// The kernels of monotonic, mocha, matcha, additive_energy, attention_context, lstm and the
// online step's dot-product scan (scan) live in <name>_kernels.inc, which <name>.cc
// includes once per target through each_target.h: for
// the x86-64 baseline (SSE2, which every x86-64 CPU runs) in namespace
// mona::core::target_baseline and, with the CMake option MONA_KERNEL_CLONES (on by default;
// x86-64 with GCC or Clang), for x86-64-v3 (AVX2, FMA, every x86 CPU since about 2015) in
// mona::core::target_v3 and for x86-64-v4 (v3 with AVX-512) in mona::core::target_v4, under
// `#pragma GCC target`. Everything a kernel inlines, OpenMP loop bodies included, is
// compiled for its target.
//
// The point is FMA: the alignment recurrences are chains of multiply-adds, and v3 does each
// in one instruction with one rounding instead of two; and AVX2 doubles the width of the
// vectorised loops (MoChA's chunk weights, the value checks). v4 doubles it again where a
// kernel asks for it: the dot products of the online step (scan_kernels.inc with
// dot_product.inc), whose
// partial sums are as wide as the target's registers. The versions therefore differ by
// rounding, and the tests compare them with tolerances, never bit for bit.
//
// The public entry points (mona/core/monotonic.h, ...) call the selected version through
// MONA_TARGET_DISPATCH. The selection is made at the first call (cpu.cc): the best target
// the CPU runs, unless the environment variable MONA_KERNEL_TARGET names one ("baseline",
// "x86-64-v3" or "x86-64-v4"), which is how `make test` runs the core suites on the baseline kernels on
// any machine (mona/core/cpu.h).
#pragma once

namespace mona::core::detail {

/// The compiled versions of the hot kernels.
enum class KernelTarget { kBaseline, kV3, kV4 };

/// The version every kernel call runs (see mona/core/cpu.h for the rule). Decided once;
/// throws mona::Error when MONA_KERNEL_TARGET is set to a name that is not a target or
/// one this CPU or build cannot run.
KernelTarget active_kernel_target();

}  // namespace mona::core::detail

// Marks a small helper of a kernel's inner loop (a tile's load, transpose or store) that must
// be inlined: out of line its vector arrays pass through memory, and GCC's size limits stop
// inlining it once the kernel that calls it grows (seen in the expected alignment backward).
#if defined(__GNUC__)
#define MONA_KERNEL_INLINE inline __attribute__((always_inline))
#else
#define MONA_KERNEL_INLINE inline
#endif

// Calls `kernel` (a name in the target namespaces, e.g. monotonic_alignment<T>) of the
// selected target with the remaining arguments.
#if defined(MONA_KERNEL_CLONES)
#define MONA_TARGET_DISPATCH(kernel, ...)                                                      \
  (::mona::core::detail::active_kernel_target() == ::mona::core::detail::KernelTarget::kV4     \
       ? ::mona::core::target_v4::kernel(__VA_ARGS__)                                          \
       : ::mona::core::detail::active_kernel_target() == ::mona::core::detail::KernelTarget::kV3 \
             ? ::mona::core::target_v3::kernel(__VA_ARGS__)                                    \
             : ::mona::core::target_baseline::kernel(__VA_ARGS__))
#else
#define MONA_TARGET_DISPATCH(kernel, ...) \
  (::mona::core::detail::active_kernel_target(), ::mona::core::target_baseline::kernel(__VA_ARGS__))
#endif
