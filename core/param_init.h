// Deterministic parameter initialisation: a tiny portable PRNG (SplitMix64)
// instead of std:: distributions, whose output differs across standard
// libraries, so every machine builds bit-identical initial weights.
#ifndef LOCKSTEP_CORE_PARAM_INIT_H_
#define LOCKSTEP_CORE_PARAM_INIT_H_

#include <cstdint>

namespace lockstep {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 24 random bits (exact in float).
  float NextUnit() {
    return static_cast<float>(Next() >> 40) * (1.0f / 16777216.0f);
  }

 private:
  uint64_t state_;
};

// The seed of layer `layer_index` of a model built from `model_seed`.
uint64_t LayerSeed(uint64_t model_seed, int64_t layer_index);

// Fills out[0, n) with Glorot-uniform draws: U(-limit, limit), limit =
// sqrt(6 / (fan_in + fan_out)), as Keras' GlorotUniform.
void GlorotUniform(uint64_t seed, int64_t fan_in, int64_t fan_out, float* out,
                   int64_t n);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_PARAM_INIT_H_
