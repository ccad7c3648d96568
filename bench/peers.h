// bench/peers.h: what mona's online step is measured against (bench/decode.cc), compiled in
// its own file for this CPU (-march=native), as a peer who builds for their machine would.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mona::bench {

/// The hard monotonic decoding of one output sequence (002 Algorithm 1, threshold tau = 0.5,
/// energies e_ij = <s_i, k_j>) as a plain row-major Eigen loop: for each step i, scan j from
/// t_{i-1} while <s_i, k_j> < 0 (sigmoid(e) < 0.5), copy the value h_{t_i} into `context`
/// [d]; once the memory is exhausted, a zero context. keys [T, d] (k_j = W h_j, the bench's
/// W = I), values [T, d] and queries [U, d], row-major: the arrays mona's online memory
/// holds. Returns the number of energies evaluated; `emitted` receives the number of steps
/// that chose an entry.
template <class T>
int64_t plain_loop_decode(int64_t& emitted, const T* keys, const T* values, const T* queries, int64_t in_len, int64_t out_len,
                          int64_t d, T* context);

/// The dot products of a query with n rows [n, d], written into out[n], by candidate `k` of
/// the fastest dot products this CPU can run: vectors as wide as the CPU's (AVX-512 when it
/// has it) with 2, 4 or 8 accumulators (lanes summed one by one), with 2 or 4 fused
/// multiply-add accumulators and a shuffle-tree sum of the lanes, and Eigen's. Returns the
/// sum of the products.
template <class T>
T best_dot_rows(int candidate, const T* q, const T* h, int64_t n, int64_t d, T* out);

/// Names of the candidates, in the order best_dot_rows numbers them.
std::vector<std::string> best_dot_candidates();

}  // namespace mona::bench
