// Vectorizable float approximations for the hot loops (std::exp is a scalar
// call GCC cannot turn into SIMD code without -ffast-math).
#ifndef LOCKSTEP_KERNELS_CPU_FAST_MATH_H_
#define LOCKSTEP_KERNELS_CPU_FAST_MATH_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

// The hot element-wise loops are compiled twice, for AVX2 and for the
// x86-64-v2 baseline the build targets, and the loader picks the one the CPU
// runs (GCC function multiversioning). Both give the same bits: element
// results do not depend on the vector width, the "avx2" target has no FMA
// to contract into, and the reductions here fix their order. Not under
// ThreadSanitizer: the loader runs the clones' resolver before TSan's
// runtime starts, and its instrumented entry crashes the program.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__)
#define LOCKSTEP_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define LOCKSTEP_VECTOR_CLONES
#endif

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

// Reductions in 8 interleaved lanes, combined in a fixed order: GCC
// vectorizes them without -ffast-math (a single running sum it must keep in
// order), and the result is the same on every run and thread count.
inline float SumLanes(int64_t n, const float* x) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += x[i + k];
  }
  for (; i < n; ++i) acc[i & 7] += x[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) +
         ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

inline float DotLanes(int64_t n, const float* x, const float* y) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += x[i + k] * y[i + k];
  }
  for (; i < n; ++i) acc[i & 7] += x[i] * y[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) +
         ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CPU_FAST_MATH_H_
