// Brute-force references for the Poisson-binomial and conditional Bernoulli tests: every
// quantity is a sum over all 2^T 0/1 sequences (T <= 16), written the slow, obvious way.
// Test-only. A row is a vector of logits x_t; p_t = 1 / (1 + exp(-x_t)), w_t = exp(x_t).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace mona::test::cbref {

inline int popcount(uint32_t m) {
  int c = 0;
  for (; m; m &= m - 1) ++c;
  return c;
}
inline bool bit(uint32_t m, int64_t t) { return (m >> t) & 1u; }

/// P(b) = prod_t p_t^{b_t} (1 - p_t)^{1 - b_t} of the 0/1 sequence encoded in `mask`.
inline double prob(const std::vector<double>& x, uint32_t mask) {
  double pr = 1;
  for (size_t t = 0; t < x.size(); ++t) {
    const double p = 1.0 / (1.0 + std::exp(-x[t]));
    pr *= bit(mask, static_cast<int64_t>(t)) ? p : 1.0 - p;
  }
  return pr;
}

inline uint32_t all_masks(size_t T) { return 1u << T; }

/// P(K = k) for k = 0 .. T (004 eq. 4).
inline std::vector<double> pmf(const std::vector<double>& x) {
  std::vector<double> out(x.size() + 1, 0.0);
  for (uint32_t m = 0; m < all_masks(x.size()); ++m) out[static_cast<size_t>(popcount(m))] += prob(x, m);
  return out;
}

/// P(b | K = k) (004 eq. 3); 0 if popcount(mask) != k.
inline double cb_prob(const std::vector<double>& x, int k, uint32_t mask) {
  if (popcount(mask) != k) return 0.0;
  return prob(x, mask) / pmf(x)[static_cast<size_t>(k)];
}

/// P(b_t = 1 | K = k).
inline std::vector<double> marginals(const std::vector<double>& x, int k) {
  std::vector<double> out(x.size(), 0.0);
  double z = 0;
  for (uint32_t m = 0; m < all_masks(x.size()); ++m) {
    if (popcount(m) != k) continue;
    const double pr = prob(x, m);
    z += pr;
    for (size_t t = 0; t < x.size(); ++t) out[t] += bit(m, static_cast<int64_t>(t)) ? pr : 0.0;
  }
  for (auto& v : out) v /= z;
  return out;
}

/// log P(K_S = j) for the suffix S = {t, ..., T-1}: the table entry Q[t, j].
inline double suffix_log_pmf(const std::vector<double>& x, size_t t, int j) {
  const std::vector<double> suffix(x.begin() + static_cast<std::ptrdiff_t>(t), x.end());
  return std::log(pmf(suffix)[static_cast<size_t>(j)]);
}

/// Sum of P(b | k) over the sequences with popcount k whose first `len` entries equal
/// those of `mask`.
inline double prefix_mass(const std::vector<double>& x, int k, uint32_t mask, size_t len) {
  const uint32_t pm = (1u << len) - 1u;
  double s = 0;
  for (uint32_t m = 0; m < all_masks(x.size()); ++m) {
    if ((m & pm) == (mask & pm)) s += cb_prob(x, k, m);
  }
  return s;
}

/// IDB step probabilities P(b_t | b_{<t}, k) of `mask` (004 eqs. 10-11), by enumeration.
inline std::vector<double> idb_steps(const std::vector<double>& x, int k, uint32_t mask) {
  std::vector<double> out(x.size());
  for (size_t t = 0; t < x.size(); ++t) out[t] = prefix_mass(x, k, mask, t + 1) / prefix_mass(x, k, mask, t);
  return out;
}

/// Positions of the highs of mask, increasing.
inline std::vector<int64_t> highs(uint32_t mask, size_t T) {
  std::vector<int64_t> p;
  for (size_t t = 0; t < T; ++t) {
    if (bit(mask, static_cast<int64_t>(t))) p.push_back(static_cast<int64_t>(t));
  }
  return p;
}

/// BB step probabilities P(t_r | t_{<r}, k) (004 eqs. 12-13): the CB mass of sequences
/// whose first r highs are t_1..t_r, over that of those whose first r - 1 highs agree.
inline std::vector<double> bb_steps(const std::vector<double>& x, int k, uint32_t mask) {
  const auto pos = highs(mask, x.size());
  auto mass = [&](int r) {  // first r highs of m equal pos[0..r)
    double s = 0;
    for (uint32_t m = 0; m < all_masks(x.size()); ++m) {
      if (popcount(m) != k) continue;
      const auto h = highs(m, x.size());
      bool ok = true;
      for (int i = 0; i < r; ++i) ok &= h[static_cast<size_t>(i)] == pos[static_cast<size_t>(i)];
      if (ok) s += cb_prob(x, k, m);
    }
    return s;
  };
  std::vector<double> out(static_cast<size_t>(k));
  for (int r = 1; r <= k; ++r) out[static_cast<size_t>(r - 1)] = mass(r) / mass(r - 1);
  return out;
}

/// R(v, S) = sum over subsets A of S with |A| = v of prod_{a in A} w_a (004 eq. 7).
inline double R(const std::vector<double>& x, int v, uint32_t set) {
  double s = 0;
  for (uint32_t m = 0; m < all_masks(x.size()); ++m) {
    if ((m & ~set) != 0 || popcount(m) != v) continue;
    double pr = 1;
    for (size_t t = 0; t < x.size(); ++t) {
      if (bit(m, static_cast<int64_t>(t))) pr *= std::exp(x[t]);
    }
    s += pr;
  }
  return s;
}

/// DB step probabilities of the draft order `order` (004 eq. 8), with R by enumeration.
inline std::vector<double> db_steps(const std::vector<double>& x, const std::vector<int64_t>& order) {
  const int k = static_cast<int>(order.size());
  uint32_t rest = all_masks(x.size()) - 1u;  // A_{j-1}^c
  std::vector<double> out;
  for (int j = 1; j <= k; ++j) {
    const int64_t t = order[static_cast<size_t>(j - 1)];
    const uint32_t without = rest & ~(1u << t);
    out.push_back(std::exp(x[static_cast<size_t>(t)]) * R(x, k - j, without) /
                  ((k - j + 1) * R(x, k - j + 1, rest)));
    rest = without;
  }
  return out;
}

/// P(c) = sum_b P(b) prod_l e[l][t_l] over sequences with L highs at t_1 < ... < t_L, where
/// log_emit is [L][T] (004 eqs. 34, 36).
inline double marginal_likelihood(const std::vector<double>& x,
                                  const std::vector<std::vector<double>>& log_emit) {
  const int L = static_cast<int>(log_emit.size());
  double s = 0;
  for (uint32_t m = 0; m < all_masks(x.size()); ++m) {
    if (popcount(m) != L) continue;
    const auto h = highs(m, x.size());
    double pr = prob(x, m);
    for (int l = 0; l < L; ++l) pr *= std::exp(log_emit[static_cast<size_t>(l)][static_cast<size_t>(h[static_cast<size_t>(l)])]);
    s += pr;
  }
  return s;
}

}  // namespace mona::test::cbref
