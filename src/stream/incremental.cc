// Recognition one element at a time; see include/mona/stream/incremental.h.
#include "mona/stream/incremental.h"

#include "mona/core/error.h"

namespace mona::stream {

IncrementalResult recognize_incrementally(const Recognizer& recognizer, const at::Tensor& inputs,
                                          const IncrementalObserver& observe) {
  MONA_CHECK(inputs.defined() && inputs.dim() >= 1,
             "recognize_incrementally: inputs: expected symbol ids [n] or frames [n, F], got ",
             inputs.defined() ? "a 0-d tensor" : "an undefined tensor");
  const int64_t n = inputs.size(0);
  IncrementalResult r;
  auto s = recognizer.create_stream();
  for (int64_t k = 0; k < n; ++k) {
    recognizer.accept(*s, inputs.narrow(0, k, 1));
    while (recognizer.is_ready(*s)) recognizer.decode(*s);
    const StreamResult so_far = recognizer.result(*s);
    // Entries past the partial result's length are dropped (a beam hypothesis replaced by
    // a shorter one); new ones were first held after k + 1 elements.
    r.inputs_read.resize(so_far.tokens.size(), k + 1);
    if (observe) observe(k + 1, false, so_far);
  }
  recognizer.input_finished(*s);
  while (recognizer.is_ready(*s)) recognizer.decode(*s);
  r.result = recognizer.result(*s);
  r.inputs_read.resize(r.result.tokens.size(), n);
  if (observe) observe(n, true, r.result);
  return r;
}

}  // namespace mona::stream
