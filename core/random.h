// Portable, seeded pseudo-random numbers: SplitMix64 for seeding and mixing,
// xoshiro256** for streams. Every draw is defined bit-for-bit here (no std::
// distributions, whose results are implementation-defined), so data order,
// weight init and dropout masks are identical on every machine and build.
#ifndef LOCKSTEP_CORE_RANDOM_H_
#define LOCKSTEP_CORE_RANDOM_H_

#include <cstdint>

namespace lockstep {

// One SplitMix64 step: advances `*state` and returns the next output.
uint64_t SplitMix64(uint64_t* state);

// Derives an independent seed from (seed, value), e.g. MixSeed(seed, epoch).
// Order matters: MixSeed(a, b) != MixSeed(b, a) in general.
uint64_t MixSeed(uint64_t seed, uint64_t value);

// xoshiro256** seeded through SplitMix64. Not thread-safe: one per thread.
class Rng {
 public:
  explicit Rng(uint64_t seed);

  uint64_t NextU64();
  // Uniform in [0, 1) with 53 (double) or 24 (float) random bits.
  double UniformDouble();
  float Uniform();
  // Uniform in [lo, hi).
  float Uniform(float lo, float hi);
  // Uniform integer in [0, n), unbiased; n must be > 0.
  uint64_t UniformInt(uint64_t n);
  // Standard normal (Box-Muller in double precision; the second value of
  // each pair is kept for the next call).
  double NormalDouble();
  float Normal() { return static_cast<float>(NormalDouble()); }
  float Normal(float mean, float stddev) { return mean + stddev * Normal(); }

 private:
  uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_RANDOM_H_
