// The LSTM cell's elementwise passes; see include/mona/core/lstm.h.
#include "mona/core/lstm.h"

#include "mona/core/error.h"
#include "parallel.h"
#include "targets.h"
#include "validate.h"
#include "vexp.h"

// The kernels, compiled once per target (targets.h).
#define MONA_TARGET_KERNELS "lstm_kernels.inc"
#include "each_target.h"
#undef MONA_TARGET_KERNELS

namespace mona::core {
namespace {

void check_lstm_sizes(const char* fn, int64_t batch, int64_t hidden) {
  mona::detail::check(batch >= 0 && hidden >= 0, fn, ": sizes must be >= 0, got batch = ", batch,
                      ", hidden = ", hidden);
}

}  // namespace

template <class T>
void lstm_cell(T* gates, const T* bias, const T* c_prev, T* c, T* h, int64_t batch, int64_t hidden) {
  const char* fn = "lstm_cell";
  check_lstm_sizes(fn, batch, hidden);
  if (batch * hidden == 0) return;
  detail::check_ptr(gates, fn, "gates");
  detail::check_ptr(bias, fn, "bias");
  detail::check_ptr(c_prev, fn, "c_prev");
  detail::check_ptr(c, fn, "c");
  detail::check_ptr(h, fn, "h");
  MONA_TARGET_DISPATCH(lstm_cell<T>, gates, bias, c_prev, c, h, batch, hidden);
}

template <class T>
void lstm_cell_backward(const T* gates, const T* c_prev, const T* c, const T* grad_h, const T* grad_c,
                        T* grad_gates, T* grad_c_prev, int64_t batch, int64_t hidden) {
  const char* fn = "lstm_cell_backward";
  check_lstm_sizes(fn, batch, hidden);
  if (batch * hidden == 0) return;
  detail::check_ptr(gates, fn, "gates");
  detail::check_ptr(c_prev, fn, "c_prev");
  detail::check_ptr(c, fn, "c");
  detail::check_ptr(grad_h, fn, "grad_h");
  detail::check_ptr(grad_c, fn, "grad_c");
  detail::check_ptr(grad_gates, fn, "grad_gates");
  detail::check_ptr(grad_c_prev, fn, "grad_c_prev");
  MONA_TARGET_DISPATCH(lstm_cell_backward<T>, gates, c_prev, c, grad_h, grad_c, grad_gates, grad_c_prev, batch,
                       hidden);
}

template void lstm_cell<float>(float*, const float*, const float*, float*, float*, int64_t, int64_t);
template void lstm_cell<double>(double*, const double*, const double*, double*, double*, int64_t, int64_t);
template void lstm_cell_backward<float>(const float*, const float*, const float*, const float*, const float*,
                                        float*, float*, int64_t, int64_t);
template void lstm_cell_backward<double>(const double*, const double*, const double*, const double*,
                                         const double*, double*, double*, int64_t, int64_t);

}  // namespace mona::core
