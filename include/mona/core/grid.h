// mona/core/grid.h: the shape of a batched alignment problem, [B, U, T], with padding.
//
// Conventions shared by every kernel in mona/core:
//   * Tensors are dense, row-major, batch first. An alignment grid is [B, U, T]: batch B,
//     output steps U (out_len, index i), memory entries T (in_len, index j). The last
//     index is contiguous.
//   * Each batch element b has valid lengths in_lens[b] <= T and out_lens[b] <= U (int64).
//     A null pointer means "all of T" / "all of U". A length may be 0.
//   * Entries outside the valid region [0, out_lens[b]) x [0, in_lens[b]) are padding:
//     kernels never read them and write exactly 0 to them, in outputs and in gradients.
//   * Indices are 0-based in code; the papers' are 1-based (paper j = code j + 1).
#pragma once

#include <cstdint>
#include <type_traits>

#include "mona/core/error.h"

namespace mona::core {

/// `Opt<T>` marks a pointer argument that may be null (`nullptr` then needs no cast):
/// the element type is deduced from the other arguments only.
template <class T>
using Opt = typename std::common_type<T>::type;

/// Sizes and per-sequence lengths of a batched [B, U, T] grid (see the header comment).
struct Grid {
  int64_t batch = 0;                  ///< B
  int64_t out_len = 0;                ///< U, the padded number of output steps
  int64_t in_len = 0;                 ///< T, the padded number of memory entries
  const int64_t* in_lens = nullptr;   ///< [B] valid input lengths, or null for all T
  const int64_t* out_lens = nullptr;  ///< [B] valid output lengths, or null for all U

  /// Valid input length of batch element b.
  int64_t T_of(int64_t b) const { return in_lens ? in_lens[b] : in_len; }
  /// Valid output length of batch element b.
  int64_t U_of(int64_t b) const { return out_lens ? out_lens[b] : out_len; }
  /// Number of entries of a [B, U, T] tensor.
  int64_t numel() const { return batch * out_len * in_len; }

  /// Throws mona::Error naming `what` (the calling kernel) unless B, U, T >= 0 and every
  /// length lies in [0, T] resp. [0, U].
  void validate(const char* what) const {
    mona::detail::check(batch >= 0, what, ": batch size must be >= 0, got ", batch);
    mona::detail::check(out_len >= 0, what, ": out_len U must be >= 0, got ", out_len);
    mona::detail::check(in_len >= 0, what, ": in_len T must be >= 0, got ", in_len);
    for (int64_t b = 0; b < batch; ++b) {
      if (in_lens) {
        mona::detail::check(in_lens[b] >= 0 && in_lens[b] <= in_len, what, ": in_lens[", b,
                            "] must lie in [0, T=", in_len, "], got ", in_lens[b]);
      }
      if (out_lens) {
        mona::detail::check(out_lens[b] >= 0 && out_lens[b] <= out_len, what, ": out_lens[", b,
                            "] must lie in [0, U=", out_len, "], got ", out_lens[b]);
      }
    }
  }
};

}  // namespace mona::core
