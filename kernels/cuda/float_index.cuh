// Token ids and positions arrive as floats in a sample's values.
#ifndef LOCKSTEP_KERNELS_CUDA_FLOAT_INDEX_CUH_
#define LOCKSTEP_KERNELS_CUDA_FLOAT_INDEX_CUH_

#include <cstdint>

namespace lockstep {
namespace cuda {

// The integer value of f when it is one in [0, limit), else -1: the CPU's
// `p = int64(f); p >= 0 && p < limit && f == float(p)` without its
// undefined cast of NaN or huge values.
__device__ inline int64_t IndexOf(float f, int64_t limit) {
  if (!(f >= 0.0f) || !(f < static_cast<float>(limit)) || f != floorf(f)) {
    return -1;
  }
  return static_cast<int64_t>(f);
}

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_FLOAT_INDEX_CUH_
