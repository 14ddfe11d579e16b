// The mask hash costs a few multiplies per element; no state is kept.
#include "kernels/cpu/dropout.h"

#include <algorithm>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

constexpr int64_t kGrain = 1 << 13;

void Apply(int64_t n, float rate, uint64_t seed, const float* in, float* out) {
  ParallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    DropoutRange(b, e - b, rate, seed, in + b, out + b);
  });
}

}  // namespace

// DropoutKeep over runs of indices that share their high 32 bits, with
// 32-bit lanes only, so the loop vectorizes.
LOCKSTEP_VECTOR_CLONES void DropoutRange(int64_t first, int64_t n, float rate,
                                         uint64_t seed, const float* in,
                                         float* out) {
  const float scale = 1.0f / (1.0f - rate);
  const uint32_t seed_lo = static_cast<uint32_t>(seed);
  const uint32_t seed_hi = static_cast<uint32_t>(seed >> 32);
  int64_t e = 0;
  while (e < n) {
    const uint64_t start = static_cast<uint64_t>(first + e);
    const uint32_t lo = static_cast<uint32_t>(start);
    const uint32_t hi = static_cast<uint32_t>(start >> 32) ^ seed_hi;
    const int64_t run = std::min<int64_t>(n - e, (int64_t{1} << 32) - lo);
    const float* x = in + e;
    float* y = out + e;
    for (int64_t k = 0; k < run; ++k) {
      const uint32_t h =
          Mix32(Mix32((lo + static_cast<uint32_t>(k)) ^ seed_lo) + hi);
      const float u =
          static_cast<float>(static_cast<int32_t>(h >> 8)) * (1.0f / 16777216.0f);
      y[k] = x[k] * (u >= rate ? scale : 0.0f);  // a blend, not a branch
    }
    e += run;
  }
}

void DropoutForward(int64_t n, float rate, uint64_t seed, const float* x,
                    float* y) {
  Apply(n, rate, seed, x, y);
}

void DropoutBackward(int64_t n, float rate, uint64_t seed, const float* dy,
                     float* dx) {
  Apply(n, rate, seed, dy, dx);
}

}  // namespace lockstep
