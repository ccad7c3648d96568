// The online step's dot-product scan (include/mona/core/scan.h), compiled per kernel target.
#include "mona/core/scan.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "targets.h"

// The kernels, compiled once per target (targets.h).
#define MONA_TARGET_KERNELS "scan_kernels.inc"
#include "each_target.h"
#undef MONA_TARGET_KERNELS

namespace mona::core {

template <class T>
T dot(const T* a, const T* b, int64_t n) {
  return MONA_TARGET_DISPATCH(dot<T>, a, b, n);
}

template <class T>
ScanResult dot_threshold_scan(const T* query, const T* keys, int64_t dim, int64_t start, int64_t available,
                              bool input_finished, double scale, double offset, const EnergyThreshold& rule) {
  mona::detail::check(dim >= 1, "dot_threshold_scan: dim must be >= 1, got ", dim);
  mona::detail::check(start >= 0, "dot_threshold_scan: start must be >= 0, got ", start);
  mona::detail::check(start <= available, "dot_threshold_scan: start (", start, ") must not exceed available (",
                available, ")");
  if (start < available) {  // an entry to score: both must be there
    mona::detail::check(query != nullptr, "dot_threshold_scan: query must not be null");
    mona::detail::check(keys != nullptr, "dot_threshold_scan: keys must not be null");
  }
  return MONA_TARGET_DISPATCH(dot_threshold_scan<T>, query, keys, dim, start, available, input_finished, scale,
                              offset, rule);
}

template <class T>
DotThresholdScanKernel<T> dot_threshold_scan_kernel() {
  return MONA_TARGET_DISPATCH(dot_threshold_scan_address<T>, static_cast<const T*>(nullptr));
}

template float dot<float>(const float*, const float*, int64_t);
template double dot<double>(const double*, const double*, int64_t);
template DotThresholdScanKernel<float> dot_threshold_scan_kernel<float>();
template DotThresholdScanKernel<double> dot_threshold_scan_kernel<double>();
template ScanResult dot_threshold_scan<float>(const float*, const float*, int64_t, int64_t, int64_t, bool, double,
                                             double, const EnergyThreshold&);
template ScanResult dot_threshold_scan<double>(const double*, const double*, int64_t, int64_t, int64_t, bool,
                                              double, double, const EnergyThreshold&);

}  // namespace mona::core
