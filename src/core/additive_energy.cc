// The additive energy, forward and backward; see include/mona/core/additive_energy.h.
#include "mona/core/additive_energy.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "mona/core/error.h"
#include "parallel.h"
#include "targets.h"
#include "validate.h"
#include "vexp.h"

// The kernels, compiled once per target (targets.h).
#define MONA_TARGET_KERNELS "additive_energy_kernels.inc"
#include "each_target.h"
#undef MONA_TARGET_KERNELS

namespace mona::core {
template <class T>
void additive_energy(const T* query, const T* keys, const T* w, T* e, int64_t batch, int64_t out_len,
                     int64_t in_len, int64_t dim) {
  const char* fn = "additive_energy";
  detail::check_sizes(fn, batch, out_len, in_len, dim);
  if (batch * out_len * in_len == 0) return;
  detail::check_ptr(e, fn, "e");
  if (dim == 0) {  // an empty sum
    std::fill(e, e + batch * out_len * in_len, T(0));
    return;
  }
  detail::check_ptr(query, fn, "query");
  detail::check_ptr(keys, fn, "keys");
  detail::check_ptr(w, fn, "w");
  MONA_TARGET_DISPATCH(additive_energy<T>, query, keys, w, e, batch, out_len, in_len, dim);
}

template <class T>
void additive_energy_backward(const T* grad_e, const T* query, const T* keys, const T* w, T* grad_query,
                              T* grad_keys, T* grad_w, int64_t batch, int64_t out_len, int64_t in_len,
                              int64_t dim) {
  const char* fn = "additive_energy_backward";
  detail::check_sizes(fn, batch, out_len, in_len, dim);
  if (batch * out_len * in_len == 0 || dim == 0) {  // no term: every gradient is 0
    if (grad_query) std::fill(grad_query, grad_query + batch * out_len * dim, T(0));
    if (grad_keys) std::fill(grad_keys, grad_keys + batch * in_len * dim, T(0));
    if (grad_w) std::fill(grad_w, grad_w + dim, T(0));
    return;
  }
  detail::check_ptr(grad_e, fn, "grad_e");
  detail::check_ptr(query, fn, "query");
  detail::check_ptr(keys, fn, "keys");
  detail::check_ptr(w, fn, "w");
  MONA_TARGET_DISPATCH(additive_energy_backward<T>, grad_e, query, keys, w, grad_query, grad_keys, grad_w, batch,
                       out_len, in_len, dim);
}

template void additive_energy<float>(const float*, const float*, const float*, float*, int64_t, int64_t,
                                     int64_t, int64_t);
template void additive_energy<double>(const double*, const double*, const double*, double*, int64_t, int64_t,
                                      int64_t, int64_t);
template void additive_energy_backward<float>(const float*, const float*, const float*, const float*, float*,
                                              float*, float*, int64_t, int64_t, int64_t, int64_t);
template void additive_energy_backward<double>(const double*, const double*, const double*, const double*,
                                               double*, double*, double*, int64_t, int64_t, int64_t, int64_t);

}  // namespace mona::core
