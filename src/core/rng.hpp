#pragma once
// Counter-based, seedable RNG (SplitMix64 stream + Box-Muller). A run is a function of
// (config, data, seed): every random draw in the project comes from one of these.
#include <cmath>
#include <cstdint>

namespace marin {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : state_(seed) {}
  uint64_t next_u64() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  double normal() {
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  // Standard normal truncated to [-3, 3] by rejection (as jax.random.truncated_normal samples).
  double trunc_normal3() {
    for (;;) {
      double z = normal();
      if (z >= -3.0 && z <= 3.0) return z;
    }
  }
  uint64_t state() const { return state_; }
  void set_state(uint64_t s) { state_ = s; }

 private:
  uint64_t state_;
};

// Stateless mixing of a key into a seed, used to give each tensor its own stream.
inline uint64_t mix_seed(uint64_t seed, uint64_t key) {
  Rng r(seed ^ (key * 0xD1B54A32D192ED03ull));
  return r.next_u64();
}

}  // namespace marin
