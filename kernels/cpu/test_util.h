// Random buffers for the kernel tests.
#ifndef LOCKSTEP_KERNELS_CPU_TEST_UTIL_H_
#define LOCKSTEP_KERNELS_CPU_TEST_UTIL_H_

#include <cstdint>
#include <random>
#include <vector>

namespace lockstep {

inline std::vector<float> RandomVector(int64_t n, uint32_t seed,
                                       float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CPU_TEST_UTIL_H_
