// The optimizer step's passes; see include/mona/core/adam.h.
#include "mona/core/adam.h"

#include <algorithm>
#include <cmath>

#include "mona/core/error.h"
#include "targets.h"
#include "validate.h"

// The kernels, compiled once per target (targets.h).
#define MONA_TARGET_KERNELS "adam_kernels.inc"
#include "each_target.h"
#undef MONA_TARGET_KERNELS

namespace mona::core {

AdamCoefficients AdamCoefficients::at(int64_t t, double lr, double beta1, double beta2, double eps,
                                      double weight_decay, double clip) {
  const char* fn = "AdamCoefficients::at";
  mona::detail::check(t >= 1, fn, ": t: expected a step >= 1, got ", t);
  mona::detail::check(lr >= 0, fn, ": lr: expected >= 0, got ", lr);
  mona::detail::check(beta1 >= 0 && beta1 < 1, fn, ": beta1: expected a value in [0, 1), got ", beta1);
  mona::detail::check(beta2 >= 0 && beta2 < 1, fn, ": beta2: expected a value in [0, 1), got ", beta2);
  mona::detail::check(eps > 0, fn, ": eps: expected > 0, got ", eps);
  mona::detail::check(weight_decay >= 0, fn, ": weight_decay: expected >= 0, got ", weight_decay);
  mona::detail::check(clip >= 0 && clip <= 1, fn, ": clip: expected a factor in [0, 1], got ", clip);
  AdamCoefficients c;
  c.clip = clip;
  c.weight_decay = weight_decay;
  c.beta1 = beta1;
  c.beta2 = beta2;
  c.eps = eps;
  // As torch::optim::Adam::step (LibTorch 1.13): the bias corrections in double.
  const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(t));
  const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(t));
  c.step_size = lr / bias_correction1;
  c.bias2_sqrt = std::sqrt(bias_correction2);
  return c;
}

template <class T>
double sum_gradients(T* grad, const T* const* others, int64_t n_others, int64_t n) {
  const char* fn = "sum_gradients";
  mona::detail::check(n >= 0 && n_others >= 0, fn, ": sizes must be >= 0, got n = ", n, ", n_others = ", n_others);
  if (n == 0) return 0;
  detail::check_ptr(grad, fn, "grad");
  if (n_others > 0) detail::check_ptr(others, fn, "others");
  for (int64_t s = 0; s < n_others; ++s) {
    mona::detail::check(others[s] != nullptr, fn, ": others[", s, "] must not be null");
  }
  return MONA_TARGET_DISPATCH(sum_gradients<T>, grad, others, n_others, n);
}

template <class T>
bool adam_update(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, int64_t n, const AdamCoefficients& c) {
  const char* fn = "adam_update";
  mona::detail::check(n >= 0, fn, ": n must be >= 0, got ", n);
  if (n == 0) return true;
  detail::check_ptr(param, fn, "param");
  detail::check_ptr(grad, fn, "grad");
  detail::check_ptr(exp_avg, fn, "exp_avg");
  detail::check_ptr(exp_avg_sq, fn, "exp_avg_sq");
  return MONA_TARGET_DISPATCH(adam_update<T>, param, grad, exp_avg, exp_avg_sq, n, c);
}

template double sum_gradients<float>(float*, const float* const*, int64_t, int64_t);
template double sum_gradients<double>(double*, const double* const*, int64_t, int64_t);
template bool adam_update<float>(float*, const float*, float*, float*, int64_t, const AdamCoefficients&);
template bool adam_update<double>(double*, const double*, double*, double*, int64_t, const AdamCoefficients&);

}  // namespace mona::core
