// bfloat16 rounding, host and device: the CPU's FloatToBf16 and
// RoundToBf16 (kernels/cpu/elementwise.cc) and the GPU's RoundInputs and
// 16-bit GEMM operands (kernels/cuda/elementwise.cu) round with this one
// function, so a bf16 job's inputs are the same bits on both.
#ifndef LOCKSTEP_KERNELS_CPU_BF16_BITS_H_
#define LOCKSTEP_KERNELS_CPU_BF16_BITS_H_

#include <stdint.h>

#include "kernels/cpu/host_device.h"

namespace lockstep {

// The bfloat16 nearest the float32 whose bits are `bits`: round to
// nearest, ties to even (add 0x7fff plus the lowest kept bit; a carry into
// the exponent is right, up to inf); a NaN stays a quiet NaN.
LOCKSTEP_HOST_DEVICE inline uint16_t Bf16FromFloatBits(uint32_t bits) {
  const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(nan ? ((bits >> 16) | 0x0040u) : rounded >> 16);
}

}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CPU_BF16_BITS_H_
