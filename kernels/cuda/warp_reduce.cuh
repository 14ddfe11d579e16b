// Warp and block reductions shared by the row-reducing kernels (LayerNorm,
// attention softmax): fixed trees, so every lane gets the same bits on
// every run.
#ifndef LOCKSTEP_KERNELS_CUDA_WARP_REDUCE_CUH_
#define LOCKSTEP_KERNELS_CUDA_WARP_REDUCE_CUH_

#include <cstdint>

#include "kernels/cuda/grid_stride.cuh"

namespace lockstep {
namespace cuda {

inline constexpr int kWarp = 32;

// XOR butterflies: every lane ends with the same value (each step adds the
// same two operands, commuted), deterministically.
__device__ inline float WarpSum(float v) {
  for (int m = kWarp / 2; m > 0; m /= 2) v += __shfl_xor_sync(~0u, v, m);
  return v;
}

__device__ inline double WarpSum(double v) {
  for (int m = kWarp / 2; m > 0; m /= 2) v += __shfl_xor_sync(~0u, v, m);
  return v;
}

__device__ inline float WarpMax(float v) {
  for (int m = kWarp / 2; m > 0; m /= 2) {
    v = fmaxf(v, __shfl_xor_sync(~0u, v, m));
  }
  return v;
}

// The block's total, in every thread: warp sums, then the warps' sums in
// order. `shared` holds one float per warp; callable repeatedly.
__device__ inline float BlockSum(float v, float* shared) {
  v = WarpSum(v);
  const int warps = (blockDim.x + kWarp - 1) / kWarp;
  __syncthreads();  // the previous call's readers are done with `shared`
  if (threadIdx.x % kWarp == 0) shared[threadIdx.x / kWarp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < warps; ++w) total += shared[w];
  return total;
}

// The same in double (the global gradient norm's sums).
__device__ inline double BlockSum(double v, double* shared) {
  v = WarpSum(v);
  const int warps = (blockDim.x + kWarp - 1) / kWarp;
  __syncthreads();
  if (threadIdx.x % kWarp == 0) shared[threadIdx.x / kWarp] = v;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < warps; ++w) total += shared[w];
  return total;
}

// Blocks for `rows` rows of rows_per_block each (capped as Blocks).
inline int RowBlocks(int64_t rows, int rows_per_block) {
  const int64_t b = (rows + rows_per_block - 1) / rows_per_block;
  return static_cast<int>(b < kMaxBlocks ? b : kMaxBlocks);
}

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_WARP_REDUCE_CUH_
