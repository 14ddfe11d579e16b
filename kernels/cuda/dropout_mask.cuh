// The dropout mask on the device: kernels/cpu/dropout.h's Mix32 and
// DropoutKeep restated as device code (the CPU header's inline functions are
// host-only), so the same (seed, element index) keeps the same units on the
// CPU and the GPU. Included by the .cu files that draw masks.
#ifndef LOCKSTEP_KERNELS_CUDA_DROPOUT_MASK_CUH_
#define LOCKSTEP_KERNELS_CUDA_DROPOUT_MASK_CUH_

#include <cstdint>

namespace lockstep {
namespace cuda {

__device__ inline uint32_t Mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x85EBCA6Bu;
  x ^= x >> 13;
  x *= 0xC2B2AE35u;
  return x ^ (x >> 16);
}

// True when element i survives dropout at `rate`.
__device__ inline bool Keep(uint64_t seed, int64_t i, float rate) {
  const uint64_t u = static_cast<uint64_t>(i);
  const uint32_t h = Mix32(Mix32(static_cast<uint32_t>(u) ^
                                 static_cast<uint32_t>(seed)) +
                           (static_cast<uint32_t>(u >> 32) ^
                            static_cast<uint32_t>(seed >> 32)));
  return static_cast<float>(static_cast<int32_t>(h >> 8)) *
             (1.0f / 16777216.0f) >=
         rate;
}

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_DROPOUT_MASK_CUH_
