// mona/core/rng.h: the seeded random number generator of the core's samplers.
//
// A small, fixed algorithm (xoshiro256**, seeded through splitmix64) so that a seed gives
// the same draws on every platform and standard library; std::uniform_real_distribution
// does not promise that. Not for cryptography.
#pragma once

#include <cstdint>

namespace mona::core {

/// Seeded generator. `uniform()` returns a double in [0, 1) with 53 random bits.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { reseed(seed); }

  /// Restarts the stream: the same seed always gives the same sequence.
  void reseed(uint64_t seed) {
    uint64_t x = seed;
    for (auto& s : s_) s = splitmix64(x);
  }

  /// Next 64 random bits.
  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  /// Uniform double in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  /// Bernoulli(p) draw: true with probability p (p <= 0 never, p >= 1 always).
  bool bernoulli(double p) { return uniform() < p; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t s_[4];
};

}  // namespace mona::core
