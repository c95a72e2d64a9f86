#pragma once
// A keyed pseudo-random permutation of [0, n) that maps any position to its element without
// materialising the order (docs/data.md, "Shuffle").
//
// The domain is the next power of two 2^b ≥ n, split into two halves of floor(b/2) and ceil(b/2)
// bits; each round replaces (L, R) by (R, L xor F(key, round, R)), the halves trading widths, which
// is a bijection of [0, 2^b) for any round function F. Values ≥ n are walked forward through the
// same permutation until they land in [0, n) (cycle walking); since 2^b < 2n, that takes fewer
// than two steps on average. The result is a bijection of [0, n) that depends on the key.
//
//   marin::FeistelPermutation p(1000, key);
//   uint64_t j = p(i);  // i, j in [0, 1000)
#include <cstdint>

namespace marin {

class FeistelPermutation {
 public:
  static constexpr int kRounds = 6;

  FeistelPermutation() = default;
  FeistelPermutation(uint64_t n, uint64_t key) : n_(n), key_(key) {
    while (bits_ < 64 && (uint64_t(1) << bits_) < n) ++bits_;
  }

  uint64_t size() const { return n_; }
  uint64_t key() const { return key_; }

  // The element at position i (i < size()).
  uint64_t operator()(uint64_t i) const {
    if (n_ <= 1) return 0;
    uint64_t x = i;
    do x = encrypt(x);
    while (x >= n_);
    return x;
  }

  // A stateless 64-bit mix (SplitMix64 finaliser) used for keys and the round function.
  static uint64_t mix(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  static uint64_t mix(uint64_t a, uint64_t b) { return mix(a ^ mix(b + 0x632BE59BD9B4E019ull)); }

 private:
  static uint64_t mask(int w) { return w >= 64 ? ~uint64_t(0) : (uint64_t(1) << w) - 1; }

  // One bijection of [0, 2^bits_).
  uint64_t encrypt(uint64_t x) const {
    int wl = bits_ / 2, wr = bits_ - wl;  // widths of L (high part) and R (low part)
    uint64_t l = x >> wr, r = x & mask(wr);
    for (int round = 0; round < kRounds; ++round) {
      const uint64_t f = mix(key_ ^ mix(r + (uint64_t(round) << 56)));
      const uint64_t nl = r, nr = (l ^ f) & mask(wl);
      l = nl;
      r = nr;
      const int t = wl;
      wl = wr;
      wr = t;
    }
    return (l << wr) | r;
  }

  uint64_t n_ = 0;
  uint64_t key_ = 0;
  int bits_ = 0;
};

}  // namespace marin
