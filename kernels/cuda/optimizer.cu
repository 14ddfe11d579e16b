// SGD and Adam update kernels: each thread runs optimizer_grid.h's
// functions, which apply core/train/optimizer.cc's rules
// (kernels/cpu/optimizer_rules.h).
#include "kernels/cuda/optimizer.h"
#include "kernels/cuda/grid_stride.cuh"
#include "kernels/cuda/warp_reduce.cuh"

namespace lockstep {
namespace cuda {
namespace {

__global__ void SgdKernel(int64_t n, const FlatRun* runs, int count, SgdStep s,
                          float* w, float* m, const float* g) {
  SgdThread(FirstIndex(), Stride(), n, runs, count, s, w, m, g);
}

__global__ void AdamKernel(int64_t n, const FlatRun* runs, int count,
                           AdamStep s, float* w, float* m, float* v,
                           const float* g) {
  AdamThread(FirstIndex(), Stride(), n, runs, count, s, w, m, v, g);
}

// One block's share of sum(g[i]^2) over the optimizer runs: a grid-stride
// sum per thread, then the block's fixed tree.
__global__ void SumSquaresKernel(int64_t n, const FlatRun* runs, int count,
                                 const float* g, double* partials) {
  __shared__ double shared[kThreads / kWarp];
  double part = SumSquaresThread(FirstIndex(), Stride(), n, runs, count, g);
  part = BlockSum(part, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = part;
}

__global__ void SumPartialsKernel(int64_t count, const double* partials,
                                  double* out) {
  __shared__ double shared[kThreads / kWarp];
  double part = 0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) part += partials[i];
  part = BlockSum(part, shared);
  if (threadIdx.x == 0) *out = part;
}

}  // namespace

cudaError_t SumSquaresPartials(int64_t n, const FlatRun* runs, int count,
                               const float* g, double* partials,
                               cudaStream_t stream) {
  SumSquaresKernel<<<kNormBlocks, kThreads, 0, stream>>>(n, runs, count, g,
                                                         partials);
  return cudaGetLastError();
}

cudaError_t SumPartials(int64_t count, const double* partials, double* out,
                        cudaStream_t stream) {
  SumPartialsKernel<<<1, kThreads, 0, stream>>>(count, partials, out);
  return cudaGetLastError();
}

cudaError_t SgdUpdate(int64_t n, const FlatRun* runs, int count,
                      const SgdStep& step, float* w, float* m, const float* g,
                      cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  SgdKernel<<<Blocks(n), kThreads, 0, stream>>>(n, runs, count, step, w, m, g);
  return cudaGetLastError();
}

cudaError_t AdamUpdate(int64_t n, const FlatRun* runs, int count,
                       const AdamStep& step, float* w, float* m, float* v,
                       const float* g, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  AdamKernel<<<Blocks(n), kThreads, 0, stream>>>(n, runs, count, step, w, m, v,
                                                 g);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace lockstep
