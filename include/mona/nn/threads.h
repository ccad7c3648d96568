// mona/nn/threads.h: how many threads LibTorch's operators use, with one pool only, and
// which kernels its matrix products run.
//
// Debian's LibTorch runs its intra-op parallelism on an OpenMP team (which mona's core
// kernels share), and its matrix products on OpenBLAS (libopenblas0-pthread), which keeps a
// pool of its own: one thread per core, spinning (sched_yield) for a while after every
// product. With both pools at the core count, each of the two waits for cores the other
// spins on. Measured on 2 cores (G2P MoChA, recipes/g2p-cmudict/configs/mocha_w4.yaml, 200
// steps): 8.1 s with one intra-op thread (OpenBLAS's pool still running beside it: 5.2 s of
// the 15 s CPU time in the kernel), 27.6 s with two (16.6 s in the kernel); with OpenBLAS
// kept to the calling thread, 0.25 s in the kernel.
//
// So mona keeps BLAS on the calling thread and takes its parallelism from elsewhere: the
// intra-op team for large operators (decoding), and data-parallel shards of the batch in
// training (mona/train/trainer.h, train.threads).
//
// The kernels: Debian's OpenBLAS (0.3.21, libopenblas0-pthread) picks its kernel family by
// the CPU's model number and, for an Intel model it does not know, falls back to its oldest
// x86-64 family, "Prescott" (SSE3), whatever vector units the CPU has (OpenBLAS issue #4267;
// upstream falls back on the CPU's features since 0.3.25). Intel's Emerald Rapids (family 6,
// model 207, AVX-512) is such a model. Measured there (bench/notes.md, "OpenBLAS's kernel
// family"): G2P training at one thread (recipes/g2p-cmudict/configs/mocha_w4.yaml) ran at
// 5,300-6,100 target tokens/s on Prescott's kernels and 11,600-13,400 on the AVX-512 ones.
// set_threads therefore also makes OpenBLAS pick again, by the CPU's features, when it fell
// back to Prescott and OPENBLAS_CORETYPE (OpenBLAS's own override) is not set.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mona::nn {

/// Sets LibTorch's intra-op thread count to `threads` (at::set_num_threads: the OpenMP team
/// of ATen's operators and mona's kernels) and OpenBLAS's own pool to one thread, so that
/// matrix products run on the thread that calls them. Without OpenBLAS (another BLAS behind
/// libblas.so.3) only the first part applies. The first call also runs use_best_blas_kernels().
/// Throws mona::ArgumentError when threads < 1.
void set_threads(int64_t threads);

/// OpenBLAS's kernel family for LibTorch's matrix products, after making OpenBLAS pick it again
/// when it fell back to "Prescott" on a CPU with AVX2 and FMA or AVX-512 (see the header
/// comment; detail::better_blas_kernels says which family) and OPENBLAS_CORETYPE is unset or
/// empty. The switch happens once per process, before any matrix product of mona's: call it
/// (or set_threads) while no other thread runs one. Returns OpenBLAS's name of the family in
/// use ("SkylakeX", "Haswell", "Zen", ...), or "" when libblas.so.3 is not OpenBLAS.
/// Results differ from Prescott's only by rounding (vector width, fused multiply-adds).
std::string use_best_blas_kernels();

namespace detail {
/// The vector extensions of a CPU that decide OpenBLAS's x86-64 kernel family.
struct CpuVectorUnits {
  bool avx2_fma = false;     ///< AVX2 and FMA (x86-64-v3)
  bool avx512 = false;       ///< AVX-512 F, BW, DQ and VL (x86-64-v4)
};
/// This CPU's (what the OS lets programs use).
CpuVectorUnits cpu_vector_units();
/// The family OpenBLAS should switch to when it picked `picked` on a CPU with `cpu`, or
/// nullptr to keep it: only a fall-back to "Prescott" is replaced, by "SkylakeX" (AVX-512) or
/// "Haswell" (AVX2 and FMA), the families that Debian's OpenBLAS 0.3.21 gives the CPUs it
/// knows with those units. (Its "Cooperlake" has the same single and double precision kernels
/// as SkylakeX, adding bfloat16 ones, and OPENBLAS_CORETYPE cannot name it in 0.3.21.)
const char* better_blas_kernels(std::string_view picked, CpuVectorUnits cpu);
}  // namespace detail

/// Makes a thread that mona did not start through OpenMP (a std::thread running a shard of
/// training, or evaluating inputs) run its operators on itself alone, whatever set_threads
/// set for the process: its OpenMP team size is set to 1, after ATen's own per-thread
/// initialisation (which would otherwise reset it to the process's count at the thread's
/// first parallel operator: two evaluation threads each ran two-thread teams on two cores).
/// Call it at the start of such a thread.
void run_operators_on_this_thread();

}  // namespace mona::nn
