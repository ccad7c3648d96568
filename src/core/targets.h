// Internal: the instruction sets a core kernel is compiled for.
//
// MONA_KERNEL_TARGETS before a kernel's definition compiles it twice, for the x86-64
// baseline (SSE2) and for x86-64-v3 (AVX2 and FMA, every x86 CPU since about 2015), and
// lets the dynamic loader pick the version the CPU can run when the program starts (GCC
// and Clang target_clones, through an ifunc resolver). Everything the kernel inlines,
// including its OpenMP loop bodies, is compiled with it. The point is FMA: the alignment
// recurrences are chains of multiply-adds, and v3 does each in one instruction with one
// rounding instead of two; and AVX2 doubles the width of the vectorised loops (MoChA's
// chunk weights, the value checks). The baseline version is what runs elsewhere, and
// what sanitizer builds run (sanitizer runtimes and ifunc resolvers do not mix), so the
// tests cover both: Release builds on a v3 machine run the v3 code, the ASan build the
// baseline. mona::core::kernel_target() names the version in use.
//
// Off with -DMONA_KERNEL_CLONES=OFF (CMake), for example to compare the two.
#pragma once

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define MONA_SANITIZED_BUILD 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MONA_SANITIZED_BUILD 1
#endif

#if defined(MONA_KERNEL_CLONES) && defined(__x86_64__) && defined(__ELF__) && \
    (defined(__GNUC__) || defined(__clang__)) && !defined(MONA_SANITIZED_BUILD)
#define MONA_KERNEL_TARGETS __attribute__((target_clones("arch=x86-64-v3", "default")))
#define MONA_KERNEL_TARGETS_ENABLED 1
#else
#define MONA_KERNEL_TARGETS
#define MONA_KERNEL_TARGETS_ENABLED 0
#endif
