// The launch shape every grid-stride kernel in kernels/cuda uses: 256-thread
// blocks, at most 8192 of them, each thread stepping by the whole grid.
// Included by .cu files only (nvcc); pass it in the cuda_library's
// nvcc_hdrs.
#ifndef LOCKSTEP_KERNELS_CUDA_GRID_STRIDE_CUH_
#define LOCKSTEP_KERNELS_CUDA_GRID_STRIDE_CUH_

#include <cstdint>

namespace lockstep {
namespace cuda {

inline constexpr int kThreads = 256;
inline constexpr int64_t kMaxBlocks = 8192;

// Blocks for n elements (at least 1 thread each, capped at kMaxBlocks).
inline int Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < kMaxBlocks ? b : kMaxBlocks);
}

__device__ inline int64_t FirstIndex() {
  return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
}
__device__ inline int64_t Stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_GRID_STRIDE_CUH_
