// The mask hash costs a few multiplies per element; no state is kept.
#include "kernels/cpu/dropout.h"

#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

constexpr int64_t kGrain = 1 << 13;

void Apply(int64_t n, float rate, uint64_t seed, const float* in, float* out) {
  const float scale = 1.0f / (1.0f - rate);
  ParallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      out[i] = DropoutKeep(seed, i, rate) ? in[i] * scale : 0.0f;
    }
  });
}

}  // namespace

void DropoutForward(int64_t n, float rate, uint64_t seed, const float* x,
                    float* y) {
  Apply(n, rate, seed, x, y);
}

void DropoutBackward(int64_t n, float rate, uint64_t seed, const float* dy,
                     float* dx) {
  Apply(n, rate, seed, dy, dx);
}

}  // namespace lockstep
