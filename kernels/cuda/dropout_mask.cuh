// The dropout mask on the device: kernels/cpu/dropout.h's Mix64 and
// DropoutKeep restated as device code (the CPU header's inline functions are
// host-only), so the same (seed, element index) keeps the same units on the
// CPU and the GPU. Included by the .cu files that draw masks.
#ifndef LOCKSTEP_KERNELS_CUDA_DROPOUT_MASK_CUH_
#define LOCKSTEP_KERNELS_CUDA_DROPOUT_MASK_CUH_

#include <cstdint>

namespace lockstep {
namespace cuda {

__device__ inline uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// True when element i survives dropout at `rate`.
__device__ inline bool Keep(uint64_t seed, int64_t i, float rate) {
  const uint64_t bits = Mix64(seed ^ Mix64(static_cast<uint64_t>(i)));
  return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f) >= rate;
}

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_DROPOUT_MASK_CUH_
