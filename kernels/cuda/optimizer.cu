// SGD and Adam update kernels: each element's expressions are written exactly
// as in core/train/optimizer.cc (same operands, same order).
#include "kernels/cuda/optimizer.h"
#include "kernels/cuda/grid_stride.cuh"
#include "kernels/cuda/warp_reduce.cuh"

namespace lockstep {
namespace cuda {
namespace {

// ClipGradients' scale: float(clipnorm / norm) above the norm, else 1 (x *
// 1.0f is x, bit for bit).
__device__ inline float ClipScale(const GradientClip& c) {
  if (c.sum_squares == nullptr || !(c.clipnorm > 0)) return 1.0f;
  const double norm = sqrt(*c.sum_squares) * static_cast<double>(c.unscale);
  return norm > c.clipnorm ? static_cast<float>(c.clipnorm / norm) : 1.0f;
}

// Loss scaling's overflow: the step is skipped on every element.
__device__ inline bool Skipped(const GradientClip& c) {
  return c.skip_nonfinite && c.sum_squares != nullptr &&
         GradientsOverflowed(*c.sum_squares, c.unscale);
}

// The first run of `runs` that ends after i (runs tile [0, n)).
__device__ inline int RunOf(const FlatRun* runs, int count, int64_t i) {
  int lo = 0, hi = count;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (runs[mid].end <= i) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Moves *k to the run holding *i, first stepping *i over runs the optimizer
// does not update (by whole strides, as the grid-stride loop would). False
// once *i is past the last run.
__device__ inline bool ToUpdatedRun(const FlatRun* runs, int count,
                                    int64_t stride, int64_t* i, int* k) {
  while (*k < count) {
    const FlatRun& r = runs[*k];
    if (*i >= r.end) {
      ++*k;
    } else if (r.update != 0) {
      return true;
    } else {
      *i += (r.end - *i + stride - 1) / stride * stride;
      ++*k;
    }
  }
  return false;
}

// Calls f(i, run) for each element of an optimizer run that this thread's
// grid-stride loop visits.
template <typename F>
__device__ inline void ForUpdated(int64_t n, const FlatRun* runs, int count,
                                  F f) {
  const int64_t stride = Stride();
  int64_t i = FirstIndex();
  if (i >= n) return;
  int k = RunOf(runs, count, i);
  while (ToUpdatedRun(runs, count, stride, &i, &k) && i < n) {
    f(i, runs[k]);
    i += stride;
  }
}

__global__ void SgdKernel(int64_t n, const FlatRun* runs, int count, SgdStep s,
                          float* w, float* m, const float* g) {
  if (Skipped(s.clip)) return;
  const float scale = ClipScale(s.clip);
  const float unscale = s.clip.unscale;
  ForUpdated(n, runs, count, [&](int64_t i, const FlatRun& run) {
    float wi = w[i];
    if (run.decay != 0) wi -= wi * s.decay_factor;
    const float gi = (g[i] * unscale) * scale;
    if (m == nullptr) {
      wi -= gi * s.lr;
    } else if (s.nesterov) {
      const float gl = gi * s.lr;
      const float mi = m[i] * s.momentum - gl;
      m[i] = mi;
      wi += mi * s.momentum - gl;
    } else {
      const float mi = m[i] * s.momentum - gi * s.lr;
      m[i] = mi;
      wi += mi;
    }
    w[i] = wi;
  });
}

__global__ void AdamKernel(int64_t n, const FlatRun* runs, int count,
                           AdamStep s, float* w, float* m, float* v,
                           const float* g) {
  if (Skipped(s.clip)) return;
  const float scale = ClipScale(s.clip);
  const float unscale = s.clip.unscale;
  ForUpdated(n, runs, count, [&](int64_t i, const FlatRun& run) {
    float wi = w[i];
    if (run.decay != 0) wi -= wi * s.decay_factor;
    const float gi = (g[i] * unscale) * scale;
    const float mi = m[i] + (gi - m[i]) * s.one_minus_b1;
    const float vi = v[i] + (gi * gi - v[i]) * s.one_minus_b2;
    m[i] = mi;
    v[i] = vi;
    wi -= (mi * s.alpha) / (sqrtf(vi) + s.eps);
    w[i] = wi;
  });
}

// One block's share of sum(g[i]^2) over the optimizer runs: a grid-stride
// sum per thread, then the block's fixed tree.
__global__ void SumSquaresKernel(int64_t n, const FlatRun* runs, int count,
                                 const float* g, double* partials) {
  __shared__ double shared[kThreads / kWarp];
  double part = 0;
  ForUpdated(n, runs, count, [&](int64_t i, const FlatRun&) {
    part += static_cast<double>(g[i]) * g[i];
  });
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
