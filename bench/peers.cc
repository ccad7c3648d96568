// See bench/peers.h. Compiled with -march=native (bench/CMakeLists.txt).
#include "peers.h"

#include <Eigen/Core>
#include <cstring>

namespace mona::bench {
namespace {

template <class T>
using Rows = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

#if defined(__AVX512F__)
constexpr int kVectorBytes = 64;
constexpr const char* kIsa = "avx512";
#elif defined(__AVX2__)
constexpr int kVectorBytes = 32;
constexpr const char* kIsa = "avx2";
#else
constexpr int kVectorBytes = 16;
constexpr const char* kIsa = "sse2";
#endif

template <class T>
struct Vector;
template <>
struct Vector<float> {
  typedef float type __attribute__((vector_size(kVectorBytes)));
};
template <>
struct Vector<double> {
  typedef double type __attribute__((vector_size(kVectorBytes)));
};

// A dot product with A independent vector accumulators of the CPU's width.
template <int A, class T>
inline T dot_accumulators(const T* a, const T* b, int64_t n) {
  using Vec = typename Vector<T>::type;
  constexpr int64_t kLanes = kVectorBytes / sizeof(T);
  Vec acc[A] = {};
  int64_t k = 0;
  for (; k + A * kLanes <= n; k += A * kLanes) {
    for (int r = 0; r < A; ++r) {
      Vec x, y;
      std::memcpy(&x, a + k + r * kLanes, sizeof(Vec));
      std::memcpy(&y, b + k + r * kLanes, sizeof(Vec));
      acc[r] += x * y;
    }
  }
  for (int r = 1; r < A; ++r) acc[0] += acc[r];
  T s = 0;
  for (int64_t l = 0; l < kLanes; ++l) s += acc[0][l];
  for (; k < n; ++k) s += a[k] * b[k];
  return s;
}

template <class T>
inline T eigen_dot(const T* a, const T* b, int64_t n) {
  return Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>(a, n).dot(
      Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>(b, n));
}

template <class T, class Dot>
T rows(Dot dot, const T* q, const T* h, int64_t n, int64_t d, T* out) {
  T total = 0;
  for (int64_t j = 0; j < n; ++j) {
    out[j] = dot(q, h + j * d, d);
    total += out[j];
  }
  return total;
}

}  // namespace

template <class T>
int64_t plain_loop_decode(int64_t& emitted, const T* keys, const T* values, const T* queries, int64_t in_len, int64_t out_len,
                          int64_t d, T* context) {
  const Rows<T> k(keys, in_len, d), h(values, in_len, d), s(queries, out_len, d);
  Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>> c(context, d);
  int64_t t = 0, inspected = 0;
  for (int64_t i = 0; i < out_len; ++i) {
    int64_t j = t;
    while (j < in_len) {
      ++inspected;
      if (s.row(i).dot(k.row(j)) >= 0) break;
      ++j;
    }
    if (j < in_len) {
      c = h.row(j).transpose();
      t = j;
      ++emitted;
    } else {
      c.setZero();
      t = in_len;
    }
  }
  return inspected;
}

template <class T>
T best_dot_rows(int candidate, const T* q, const T* h, int64_t n, int64_t d, T* out) {
  switch (candidate) {
    case 0: return rows(dot_accumulators<2, T>, q, h, n, d, out);
    case 1: return rows(dot_accumulators<4, T>, q, h, n, d, out);
    case 2: return rows(dot_accumulators<8, T>, q, h, n, d, out);
    default: return rows(eigen_dot<T>, q, h, n, d, out);
  }
}

std::vector<std::string> best_dot_candidates() {
  const std::string isa = kIsa;
  return {isa + "_x2", isa + "_x4", isa + "_x8", "eigen"};
}

template int64_t plain_loop_decode<float>(int64_t&, const float*, const float*, const float*, int64_t, int64_t, int64_t,
                                          float*);
template int64_t plain_loop_decode<double>(int64_t&, const double*, const double*, const double*, int64_t, int64_t, int64_t,
                                           double*);
template float best_dot_rows<float>(int, const float*, const float*, int64_t, int64_t, float*);
template double best_dot_rows<double>(int, const double*, const double*, int64_t, int64_t, double*);

}  // namespace mona::bench
