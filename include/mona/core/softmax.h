// mona/core/softmax.h: softmax over the valid entries of each row, and over a range.
//
// Soft attention (000 eqs. 4-6, the baseline mechanism) normalises the energies of each
// output step over the memory:  w[i, j] = exp(e[i, j] - m) / sum_k exp(e[i, k] - m),
// m = max_k e[i, k], k < in_lens[b]. The max shift makes the result exact for energies of
// any magnitude (no overflow for 1e4, no 0/0 when all are -1e4).
//
// The hard-time chunk softmax of MoChA (000 eq. 16, chunk [t - w + 1, t]) and of MAtChA
// (000 eq. 27, chunk [t_{i-1}, t_i]) is the same operation over a range: chunk_softmax.
//
// Backward: dL/de[i, j] = w[i, j] * (g[i, j] - sum_k g[i, k] w[i, k])  (docs/math.md sec. 1).
//
// Shapes: e, w, grad_w, grad_e: [B, U, T]; lengths and padding as in mona/core/grid.h
// (padding written 0; a row of length 0 is all zero).
// Errors (mona::Error, naming the kernel, the argument, the value and its index): null
// pointers, bad sizes or lengths, non-finite energies in the valid region (they have no
// meaningful softmax), non-finite grad_w, and (backward) a saved output w that is negative
// or not finite.
#pragma once

#include <cstdint>

#include "mona/core/grid.h"

namespace mona::core {

/// w = softmax(e) over j < in_lens[b], for every valid row of a [B, U, T] grid.
template <class T>
void softmax(const T* e, T* w, const Grid& grid);

/// Backward of softmax: grad_e from grad_w and the forward output w. grad_e may alias
/// grad_w.
template <class T>
void softmax_backward(const T* grad_w, const T* w, T* grad_e, const Grid& grid);

/// Softmax of the energies u[begin, end] (inclusive; 0 <= begin <= end) into
/// weights[0 .. end - begin]. Used at test time for MoChA's chunk [max(0, t-w+1), t]
/// (000 eq. 16) and MAtChA's chunk [t_{i-1}, t_i] (000 eq. 27). Throws mona::Error for
/// an empty or negative range or a non-finite energy in it.
template <class T>
void chunk_softmax(const T* u, int64_t begin, int64_t end, T* weights);

}  // namespace mona::core
