// SplitMix64 and xoshiro256** (Blackman & Vigna, public domain reference
// algorithms), plus the uniform and normal draws built on them.
#include "core/random.h"

#include <cmath>

namespace lockstep {
namespace {

inline uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t MixSeed(uint64_t seed, uint64_t value) {
  // Two rounds so that nearby (seed, value) pairs land far apart and the
  // result is not symmetric in its arguments.
  uint64_t s = seed;
  uint64_t a = SplitMix64(&s);
  s = a ^ (value * 0xd1b54a32d192ed03ULL + 0x8cb92ba72f3d8dd7ULL);
  return SplitMix64(&s);
}

Rng::Rng(uint64_t seed) {
  uint64_t s = seed;
  for (uint64_t& w : s_) w = SplitMix64(&s);
}

uint64_t Rng::NextU64() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

double Rng::UniformDouble() {
  return static_cast<double>(NextU64() >> 11) * 0x1.0p-53;
}

float Rng::Uniform() {
  return static_cast<float>(NextU64() >> 40) * 0x1.0p-24f;
}

float Rng::Uniform(float lo, float hi) {
  const float v = lo + (hi - lo) * Uniform();
  return v < hi ? v : lo;  // guard rounding up to hi
}

uint64_t Rng::UniformInt(uint64_t n) {
  // Rejection on the top of the range keeps every value equally likely.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = NextU64();
  } while (x >= limit);
  return x % n;
}

double Rng::NormalDouble() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  // u1 in (0, 1] so the log is finite.
  const double u1 = 1.0 - UniformDouble();
  const double u2 = UniformDouble();
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = 2.0 * M_PI * u2;
  spare_ = r * std::sin(theta);
  has_spare_ = true;
  return r * std::cos(theta);
}

}  // namespace lockstep
