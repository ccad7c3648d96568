// mona/nn/threads.h: how many threads LibTorch's operators use, with one pool only.
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
#pragma once

#include <cstdint>

namespace mona::nn {

/// Sets LibTorch's intra-op thread count to `threads` (at::set_num_threads: the OpenMP team
/// of ATen's operators and mona's kernels) and OpenBLAS's own pool to one thread, so that
/// matrix products run on the thread that calls them. Without OpenBLAS (another BLAS behind
/// libblas.so.3) only the first part applies. Throws mona::ArgumentError when threads < 1.
void set_threads(int64_t threads);

/// Makes a thread that mona did not start through OpenMP (a std::thread running a shard of
/// training, or evaluating inputs) run its operators on itself alone, whatever set_threads
/// set for the process: its OpenMP team size is set to 1, after ATen's own per-thread
/// initialisation (which would otherwise reset it to the process's count at the thread's
/// first parallel operator: two evaluation threads each ran two-thread teams on two cores).
/// Call it at the start of such a thread.
void run_operators_on_this_thread();

}  // namespace mona::nn
