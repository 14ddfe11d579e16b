// Glorot-uniform from SplitMix64.
#include "core/param_init.h"

#include <algorithm>
#include <cmath>

namespace lockstep {

uint64_t LayerSeed(uint64_t model_seed, int64_t layer_index) {
  SplitMix64 a(model_seed);
  SplitMix64 b(a.Next() ^ static_cast<uint64_t>(layer_index + 1));
  return b.Next();
}

void GlorotUniform(uint64_t seed, int64_t fan_in, int64_t fan_out, float* out,
                   int64_t n) {
  const double limit = std::sqrt(
      6.0 / static_cast<double>(std::max<int64_t>(fan_in + fan_out, 1)));
  SplitMix64 rng(seed);
  for (int64_t i = 0; i < n; ++i) {
    out[i] = static_cast<float>((2.0 * rng.NextUnit() - 1.0) * limit);
  }
}

}  // namespace lockstep
