// Internal: exp(x) for x <= 0, written as plain arithmetic so that loops calling it
// vectorise (libm's exp is an opaque call, one value at a time).
//
// Used where every exponent is a softmax exponent u - max(u) <= 0 (MoChA's chunk weights),
// and for tanh and sigmoid through exp(-|x|) (the additive energy, the LSTM cell).
// Method: x = n ln2 + r with n = round(x / ln2) and |r| <= ln2 / 2 (ln2 split into a
// short high part and a low correction so that n ln2 is exact), exp(r) by a minimax
// polynomial (float, Cephes expf) or a Pade form (double, Cephes exp), times 2^n built in
// the exponent bits. n is read off the bits of x / ln2 + M for the magic number
// M = 1.5 * 2^mantissa_bits, which rounds to the nearest integer and places it in the
// low bits, so no float-to-int conversion is needed. Accuracy (tests/core/test_vexp.cc):
// within 2 ulp of the correctly rounded exp over the whole range; exp(0) = 1 exactly.
// Arguments below ln of the smallest normal number (-87.34 float, -708.40 double) give 0: the
// true value is below 1.2e-38 resp. 2.3e-308, so the absolute error is at most that.
// NaN is not handled (callers have checked their energies are finite). The same arithmetic
// on GCC vectors, for kernels that write their lanes out: vexp_lanes.inc.
#pragma once

#include <cstdint>
#include <cstring>

namespace mona::core::detail {

inline float exp_nonpositive(float x) {
  const float kMagic = 12582912.0f;  // 1.5 * 2^23
  const float keep = x >= -87.3365f ? 1.0f : 0.0f;  // 0 below ln(FLT_MIN)
  x = x < -87.3365f ? -87.3365f : x;
  const float t = x * 1.44269504088896341f + kMagic;
  const float n = t - kMagic;
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  int32_t ti, mi;
  std::memcpy(&ti, &t, sizeof ti);
  std::memcpy(&mi, &kMagic, sizeof mi);
  const int32_t bits = (ti - mi + 127) << 23;  // 2^n, n in [-126, 0]
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return keep * (p * scale);
}

inline double exp_nonpositive(double x) {
  const double kMagic = 6755399441055744.0;  // 1.5 * 2^52
  const double keep = x >= -708.3964 ? 1.0 : 0.0;  // 0 below ln(DBL_MIN)
  x = x < -708.3964 ? -708.3964 : x;
  const double t = x * 1.4426950408889634073599 + kMagic;
  const double n = t - kMagic;
  const double r = (x - n * 6.93145751953125e-1) - n * 1.42860682030941723212e-6;
  const double rr = r * r;
  const double P =
      r * ((1.26177193074810590878e-4 * rr + 3.02994407707441961300e-2) * rr +
           9.99999999999999999910e-1);
  const double Q = ((3.00198505138664455042e-6 * rr + 2.52448340349684104192e-3) * rr +
                    2.27265548208155028766e-1) * rr + 2.00000000000000000009e0;
  const double e = 1.0 + 2.0 * P / (Q - P);
  int64_t ti, mi;
  std::memcpy(&ti, &t, sizeof ti);
  std::memcpy(&mi, &kMagic, sizeof mi);
  const int64_t bits = (ti - mi + 1023) * (int64_t(1) << 52);  // 2^n, n in [-1022, 0]
  double scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return keep * (e * scale);
}

/// tanh(x) = sign(x) (1 - e) / (1 + e) with e = exp(-2 |x|) <= 1: plain arithmetic and
/// selects, so that loops over it vectorise. Within a few ulp of 1 of the exact value for
/// every finite x (float 6e-8, double 1.1e-16); its relative error near 0 is larger than
/// libm's.
template <class T>
inline T tanh_by_exp(T x) {
  const T ax = x < T(0) ? -x : x;
  const T e = exp_nonpositive(T(-2) * ax);
  const T t = (T(1) - e) / (T(1) + e);
  return x < T(0) ? -t : t;
}

/// sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) below, e = exp(-|x|) <= 1, so that
/// no exponential overflows; vectorises like tanh_by_exp, with the same absolute accuracy.
template <class T>
inline T sigmoid_by_exp(T x) {
  const T e = exp_nonpositive(x < T(0) ? x : -x);
  const T r = T(1) / (T(1) + e);
  return x < T(0) ? e * r : r;
}

}  // namespace mona::core::detail
