// The dropout mask: whether element i of a tensor survives dropout at
// `rate`, a pure function of (seed, i). Host and device code alike
// (kernels/cuda's dropout and attention kernels include it too), so the CPU
// and the GPU drop the same units.
#ifndef LOCKSTEP_KERNELS_CPU_DROPOUT_MASK_H_
#define LOCKSTEP_KERNELS_CPU_DROPOUT_MASK_H_

#include <cstdint>

#include "kernels/cpu/host_device.h"

namespace lockstep {

// murmur3's 32-bit finalizer. 32-bit multiplies vectorize on every x86-64
// level (64-bit ones do not before AVX-512), so the mask costs little.
LOCKSTEP_HOST_DEVICE inline uint32_t Mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x85EBCA6Bu;
  x ^= x >> 13;
  x *= 0xC2B2AE35u;
  return x ^ (x >> 16);
}

// Whether element i is kept: a 24-bit uniform draw in [0, 1) from a hash of
// (seed, i) is >= rate.
LOCKSTEP_HOST_DEVICE inline bool DropoutKeep(uint64_t seed, int64_t i,
                                             float rate) {
  const uint64_t u = static_cast<uint64_t>(i);
  const uint32_t h = Mix32(Mix32(static_cast<uint32_t>(u) ^
                                 static_cast<uint32_t>(seed)) +
                           (static_cast<uint32_t>(u >> 32) ^
                            static_cast<uint32_t>(seed >> 32)));
  return static_cast<float>(static_cast<int32_t>(h >> 8)) *
             (1.0f / 16777216.0f) >=
         rate;
}

}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CPU_DROPOUT_MASK_H_
