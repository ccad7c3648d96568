// mona/stream/incremental.h: recognition of one input fed to a Recognizer one element at a
// time, as a live stream receives it, recording how many input elements had been read when
// each output token appeared. It is what `mona stream` shows and what the streaming latency
// of evaluation (train::evaluate, EvalResult::latency; the metrics of mona/io/metrics.h) is
// computed from.
//
//   const auto r = stream::recognize_incrementally(recognizer, x);  // x: ids [n] or frames [n, F]
//   r.result           // the recognition: equal to recognizer.recognize(x), bit for bit
//                      // (unless decode's </s> rules depend on the input finishing, nn/search.h)
//   r.inputs_read[i]   // g(i + 1) of mona/io/metrics.h: elements read when token i appeared
//
// The loop is the one of stream.h's header comment with one element per accept() call:
//   for k = 1..n: accept(element k); decode while is_ready; look at result()
//   input_finished(); decode while is_ready; result()
// Since the runtime's result does not depend on how the input is split into accept() calls
// (stream.h), the tokens, positions and score are those of Recognizer::recognize.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "mona/stream/stream.h"

namespace mona::stream {

/// What recognize_incrementally returns.
struct IncrementalResult {
  /// The final result, equal to Recognizer::recognize of the whole input.
  StreamResult result;
  /// One entry per token of `result`: the number of input elements read (accepted) when the
  /// token appeared, 1..n for an input of n elements; n for a token that came only after
  /// the end of the input (0 for an empty input). Precisely, inputs_read[i] is the least k
  /// such that after reading k elements, and after every later element, the partial result
  /// held more than i tokens. For greedy search the partial result only grows, so this is
  /// the element at which token i was emitted (g(i + 1) of mona/io/metrics.h). Beam search's
  /// best hypothesis can be replaced by another until the end, so there it only says since
  /// when the result has been that long, not when its token i was decided (mona measures
  /// latency for greedy search only). Always non-decreasing.
  std::vector<int64_t> inputs_read;
};

/// Called by recognize_incrementally after each element has been read and decoded as far
/// as it allows (`inputs_read` = k in 1..n, `finished` false), and once more after the end of
/// the input has been decoded (`inputs_read` = n, `finished` true); `so_far` is the partial
/// result at that point (after the end: the final result).
using IncrementalObserver = std::function<void(int64_t inputs_read, bool finished, const StreamResult& so_far)>;

/// Recognises `inputs` (symbol ids [n] int64, or frames [n, F] for a feature model; an
/// element is one row) with a new stream of `recognizer`, accepting one element at a time
/// and decoding as far as possible after each; calls `observe`, when given, at each of those
/// points (see IncrementalObserver). Returns the final result and the read counts (see
/// IncrementalResult). Throws mona::ArgumentError when `inputs` is undefined or a 0-d
/// tensor, and what Recognizer::accept throws for inputs of the wrong kind; an exception of
/// `observe` propagates.
IncrementalResult recognize_incrementally(const Recognizer& recognizer, const at::Tensor& inputs,
                                          const IncrementalObserver& observe = nullptr);

}  // namespace mona::stream
