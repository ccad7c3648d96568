// Internal: compiles the kernels of the file MONA_TARGET_KERNELS names once per target
// instruction set (targets.h), each copy in the target's namespace: mona::core::
// target_baseline, and with MONA_KERNEL_CLONES mona::core::target_v3 under
// `#pragma GCC target`. Include it after every other #include of the .cc file, so that
// inline functions of headers keep the baseline for their out-of-line copies and are
// compiled for v3 only where they are inlined into a v3 kernel. No include guard: each
// kernel file includes it once.
#if !defined(MONA_TARGET_KERNELS)
#error "define MONA_TARGET_KERNELS as the name of the kernel file to include"
#endif

namespace mona::core::target_baseline {
#include MONA_TARGET_KERNELS
}  // namespace mona::core::target_baseline

#if defined(MONA_KERNEL_CLONES)
// The instruction sets of x86-64-v3 (as ISA flags rather than "arch=x86-64-v3", so that the
// baseline's inline functions may still be inlined into these kernels).
#pragma GCC push_options
#pragma GCC target("avx,avx2,fma,bmi,bmi2,lzcnt,movbe,f16c,popcnt,sse3,ssse3,sse4.1,sse4.2")
namespace mona::core::target_v3 {
#include MONA_TARGET_KERNELS
}  // namespace mona::core::target_v3
#pragma GCC pop_options
#endif
