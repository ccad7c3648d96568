// mona/data/tokens.h: the reserved token ids, the same in every vocabulary, model and
// search of mona (mona/data/vocabulary.h assigns them, mona/nn/seq2seq.h pads, starts and
// ends sequences with them, mona/nn/search.h stops at kEos).
#pragma once

#include <array>
#include <cstdint>

namespace mona::data {

inline constexpr int64_t kPad = 0;  ///< "<pad>": padding in batched tensors
inline constexpr int64_t kBos = 1;  ///< "<s>": start of sequence (the first decoder input)
inline constexpr int64_t kEos = 2;  ///< "</s>": end of sequence (the last decoder target)
inline constexpr int64_t kUnk = 3;  ///< "<unk>": a symbol not in the vocabulary
/// How many ids are reserved (0 .. kNumReserved - 1); other symbols follow.
inline constexpr int64_t kNumReserved = 4;
/// The reserved symbols, indexed by id.
inline constexpr std::array<const char*, kNumReserved> kReservedSymbols = {"<pad>", "<s>", "</s>",
                                                                           "<unk>"};

}  // namespace mona::data
