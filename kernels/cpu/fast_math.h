// Vectorizable float approximations for the hot loops (std::exp is a scalar
// call GCC cannot turn into SIMD code without -ffast-math).
#ifndef LOCKSTEP_KERNELS_CPU_FAST_MATH_H_
#define LOCKSTEP_KERNELS_CPU_FAST_MATH_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace lockstep {

// exp(x) for x <= 0 (softmax after subtracting the maximum, GELU's
// Gaussian), relative error ~2e-7; exp(-87) and below give ~1e-38.
inline float ExpNonPositive(float x) {
  x = std::max(x, -87.0f);
  // x = n ln2 + r, |r| <= ln2 / 2 (Cody-Waite: ln2 in two parts).
  const float n = std::floor(x * 1.44269504f + 0.5f);
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CPU_FAST_MATH_H_
