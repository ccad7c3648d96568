// Internal: compiles the kernels of the file MONA_TARGET_KERNELS names once per target
// instruction set (targets.h), each copy in the target's namespace: mona::core::
// target_baseline, and with MONA_KERNEL_CLONES mona::core::target_v3 and target_v4 under
// `#pragma GCC target`. Inside each copy MONA_TARGET_VECTOR_BYTES is the width of the
// target's vector registers (16, 32, 64), for kernels that size their accumulators by it. Include it after every other #include of the .cc file, so that
// inline functions of headers keep the baseline for their out-of-line copies and are
// compiled for v3 only where they are inlined into a v3 kernel. No include guard: each
// kernel file includes it once.
#if !defined(MONA_TARGET_KERNELS)
#error "define MONA_TARGET_KERNELS as the name of the kernel file to include"
#endif

#define MONA_TARGET_VECTOR_BYTES 16
namespace mona::core::target_baseline {
#include MONA_TARGET_KERNELS
}  // namespace mona::core::target_baseline
#undef MONA_TARGET_VECTOR_BYTES

#if defined(MONA_KERNEL_CLONES)
// The instruction sets of x86-64-v3 (as ISA flags rather than "arch=x86-64-v3", so that the
// baseline's inline functions may still be inlined into these kernels).
#pragma GCC push_options
#pragma GCC target("avx,avx2,fma,bmi,bmi2,lzcnt,movbe,f16c,popcnt,sse3,ssse3,sse4.1,sse4.2")
#define MONA_TARGET_VECTOR_BYTES 32
namespace mona::core::target_v3 {
#include MONA_TARGET_KERNELS
}  // namespace mona::core::target_v3
#undef MONA_TARGET_VECTOR_BYTES
#pragma GCC pop_options
// x86-64-v4: v3 plus AVX-512 (F, BW, CD, DQ, VL). GCC keeps 256-bit vectors for its own
// vectorised loops unless told otherwise (prefer-vector-width), so v4 differs from v3 where
// a kernel asks for 64-byte vectors itself (MONA_TARGET_VECTOR_BYTES) and in the AVX-512
// instructions (masked tails, more registers) GCC may pick.
#pragma GCC push_options
#pragma GCC target("avx,avx2,fma,bmi,bmi2,lzcnt,movbe,f16c,popcnt,sse3,ssse3,sse4.1,sse4.2," \
                   "avx512f,avx512bw,avx512cd,avx512dq,avx512vl")
#define MONA_TARGET_VECTOR_BYTES 64
namespace mona::core::target_v4 {
#include MONA_TARGET_KERNELS
}  // namespace mona::core::target_v4
#undef MONA_TARGET_VECTOR_BYTES
#pragma GCC pop_options
#endif
