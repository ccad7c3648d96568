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

// The constants of the method, one set per precision, read by exp_nonpositive below and by
// exp_nonpositive_lanes (vexp_lanes.inc). ln 2 = kLn2Hi + kLn2Lo, kLn2Hi with few enough
// bits that n kLn2Hi is exact.
namespace vexp_float {  // Cephes expf
inline constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
inline constexpr float kMinArg = -87.3365f;   // ln(FLT_MIN): below it the result is 0
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
// exp(r) = 1 + r + r^2 (kP0 r^5 + kP1 r^4 + ... + kP5), evaluated by Horner.
inline constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                       kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;
inline constexpr int32_t kBias = 127, kMantissaBits = 23;  // 2^n = (n + kBias) << kMantissaBits
}  // namespace vexp_float

namespace vexp_double {  // Cephes exp
inline constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
inline constexpr double kMinArg = -708.3964;          // ln(DBL_MIN): below it the result is 0
inline constexpr double kLog2e = 1.4426950408889634073599;
inline constexpr double kLn2Hi = 6.93145751953125e-1, kLn2Lo = 1.42860682030941723212e-6;
// exp(r) = 1 + 2 P / (Q - P), P = r ((kP0 r^2 + kP1) r^2 + kP2),
// Q = ((kQ0 r^2 + kQ1) r^2 + kQ2) r^2 + kQ3.
inline constexpr double kP0 = 1.26177193074810590878e-4, kP1 = 3.02994407707441961300e-2,
                        kP2 = 9.99999999999999999910e-1;
inline constexpr double kQ0 = 3.00198505138664455042e-6, kQ1 = 2.52448340349684104192e-3,
                        kQ2 = 2.27265548208155028766e-1, kQ3 = 2.00000000000000000009e0;
inline constexpr int64_t kBias = 1023, kMantissaBits = 52;  // 2^n = (n + kBias) << kMantissaBits
}  // namespace vexp_double

inline float exp_nonpositive(float x) {
  namespace c = vexp_float;
  const float keep = x >= c::kMinArg ? 1.0f : 0.0f;
  x = x < c::kMinArg ? c::kMinArg : x;
  const float t = x * c::kLog2e + c::kMagic;
  const float n = t - c::kMagic;
  const float r = (x - n * c::kLn2Hi) - n * c::kLn2Lo;
  float p = c::kP0;
  p = p * r + c::kP1;
  p = p * r + c::kP2;
  p = p * r + c::kP3;
  p = p * r + c::kP4;
  p = p * r + c::kP5;
  p = p * (r * r) + r + 1.0f;
  int32_t ti, mi;
  std::memcpy(&ti, &t, sizeof ti);
  std::memcpy(&mi, &c::kMagic, sizeof mi);
  const int32_t bits = (ti - mi + c::kBias) << c::kMantissaBits;  // 2^n, n in [-126, 0]
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return keep * (p * scale);
}

inline double exp_nonpositive(double x) {
  namespace c = vexp_double;
  const double keep = x >= c::kMinArg ? 1.0 : 0.0;
  x = x < c::kMinArg ? c::kMinArg : x;
  const double t = x * c::kLog2e + c::kMagic;
  const double n = t - c::kMagic;
  const double r = (x - n * c::kLn2Hi) - n * c::kLn2Lo;
  const double rr = r * r;
  const double P = r * ((c::kP0 * rr + c::kP1) * rr + c::kP2);
  const double Q = ((c::kQ0 * rr + c::kQ1) * rr + c::kQ2) * rr + c::kQ3;
  const double e = 1.0 + 2.0 * P / (Q - P);
  int64_t ti, mi;
  std::memcpy(&ti, &t, sizeof ti);
  std::memcpy(&mi, &c::kMagic, sizeof mi);
  // 2^n, n in [-1022, 0]
  const int64_t bits = (ti - mi + c::kBias) * (int64_t(1) << c::kMantissaBits);
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
