// Inverted dropout whose mask is a pure function of (seed, element index):
// backward regenerates it instead of storing it, and replicas or restarts
// given the same seed drop the same units.
#ifndef LOCKSTEP_KERNELS_CPU_DROPOUT_H_
#define LOCKSTEP_KERNELS_CPU_DROPOUT_H_

#include <cstdint>

#include "kernels/cpu/dropout_mask.h"

namespace lockstep {

// SplitMix64's finalizer: a well-mixed 64-bit hash of x.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// y[i] = keep(i) ? x[i] / (1 - rate) : 0, for i in [0, n). rate in [0, 1).
void DropoutForward(int64_t n, float rate, uint64_t seed, const float* x,
                    float* y);
// dx[i] = keep(i) ? dy[i] / (1 - rate) : 0, the same mask. dx may be dy.
void DropoutBackward(int64_t n, float rate, uint64_t seed, const float* dy,
                     float* dx);
// out[e] = keep(first + e) ? in[e] / (1 - rate) : 0 for e in [0, n), on the
// calling thread (a slice of a larger masked tensor, e.g. one attention
// head's probabilities). out may be in.
void DropoutRange(int64_t first, int64_t n, float rate, uint64_t seed,
                  const float* in, float* out);

}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CPU_DROPOUT_H_
