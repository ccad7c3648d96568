// The attention context, forward and backward; see include/mona/core/attention_context.h.
#include "mona/core/attention_context.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "mona/core/error.h"
#include "parallel.h"
#include "targets.h"
#include "validate.h"

// The kernels, compiled once per target (targets.h).
#define MONA_TARGET_KERNELS "attention_context_kernels.inc"
#include "each_target.h"
#undef MONA_TARGET_KERNELS

namespace mona::core {
template <class T>
void attention_context(const T* w, const T* h, T* c, int64_t batch, int64_t out_len, int64_t in_len, int64_t dim) {
  const char* fn = "attention_context";
  detail::check_sizes(fn, batch, out_len, in_len, dim);
  if (batch * out_len * dim == 0) return;
  detail::check_ptr(c, fn, "c");
  if (in_len == 0) {  // an empty sum
    std::fill(c, c + batch * out_len * dim, T(0));
    return;
  }
  detail::check_ptr(w, fn, "w");
  detail::check_ptr(h, fn, "h");
  MONA_TARGET_DISPATCH(attention_context<T>, w, h, c, batch, out_len, in_len, dim);
}

template <class T>
void attention_context_backward(const T* grad_c, const T* w, const T* h, T* grad_w, T* grad_h, int64_t batch,
                                int64_t out_len, int64_t in_len, int64_t dim) {
  const char* fn = "attention_context_backward";
  detail::check_sizes(fn, batch, out_len, in_len, dim);
  if (batch * out_len * in_len * dim == 0) {  // no term: every gradient is 0
    if (grad_w) std::fill(grad_w, grad_w + batch * out_len * in_len, T(0));
    if (grad_h) std::fill(grad_h, grad_h + batch * in_len * dim, T(0));
    return;
  }
  detail::check_ptr(grad_c, fn, "grad_c");
  detail::check_ptr(w, fn, "w");
  detail::check_ptr(h, fn, "h");
  MONA_TARGET_DISPATCH(attention_context_backward<T>, grad_c, w, h, grad_w, grad_h, batch, out_len, in_len, dim);
}

template void attention_context<float>(const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t);
template void attention_context<double>(const double*, const double*, double*, int64_t, int64_t, int64_t,
                                        int64_t);
template void attention_context_backward<float>(const float*, const float*, const float*, float*, float*, int64_t,
                                                 int64_t, int64_t, int64_t);
template void attention_context_backward<double>(const double*, const double*, const double*, double*, double*,
                                                  int64_t, int64_t, int64_t, int64_t);

}  // namespace mona::core
