// GELU with a vectorizable erf: Abramowitz & Stegun 7.1.26 over an exp that
// is a Cody-Waite range reduction plus a degree-6 polynomial, so GCC turns
// the loops into SIMD code (std::erf and std::exp are scalar calls).
#include "kernels/cpu/gelu.h"

#include <cmath>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

constexpr int64_t kGrain = 1 << 13;

// erf(|x|) through 1 - poly(t) exp(-x^2), t = 1 / (1 + p |x|).
inline float ErfAbs(float ax) {
  const float t = 1.0f / (1.0f + 0.3275911f * ax);
  float poly = 1.061405429f;
  poly = poly * t - 1.453152027f;
  poly = poly * t + 1.421413741f;
  poly = poly * t - 0.284496736f;
  poly = poly * t + 0.254829592f;
  poly *= t;
  return 1.0f - poly * ExpNonPositive(-ax * ax);
}

constexpr float kInvSqrt2 = 0.70710678f;
constexpr float kInvSqrt2Pi = 0.39894228f;

// Phi(x) = 0.5 (1 + erf(x / sqrt 2)).
inline float Phi(float x) {
  const float e = ErfAbs(std::fabs(x) * kInvSqrt2);
  return 0.5f + 0.5f * (x < 0.0f ? -e : e);
}

inline float Gelu(float x) { return x * Phi(x); }

inline float DGelu(float x) {
  return Phi(x) + x * kInvSqrt2Pi * ExpNonPositive(-0.5f * x * x);
}

LOCKSTEP_VECTOR_CLONES void GeluRange(int64_t n, const float* x, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = Gelu(x[i]);
}

LOCKSTEP_VECTOR_CLONES void GeluBackwardRange(int64_t n, const float* x,
                                              const float* dy, float* dx) {
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * DGelu(x[i]);
}

}  // namespace

float GeluValue(float x) { return Gelu(x); }

float GeluDerivative(float x) { return DGelu(x); }

void GeluForward(int64_t n, const float* x, float* y) {
  ParallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    GeluRange(e - b, x + b, y + b);
  });
}

void GeluBackward(int64_t n, const float* x, const float* dy, float* dx) {
  ParallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    GeluBackwardRange(e - b, x + b, dy + b, dx + b);
  });
}

}  // namespace lockstep
