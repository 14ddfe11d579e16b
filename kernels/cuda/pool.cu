// Max and average pooling: one thread per output element forward, one per
// input element backward (a gather over the windows that contain it). Global
// average pooling: one thread per (sample, channel) forward, per element
// backward.
#include "kernels/cuda/pool.h"
#include "kernels/cuda/grid_stride.cuh"

namespace lockstep {
namespace cuda {
namespace {

// The geometry's fields, by value (Pool2DGeometry has a host-only static).
struct Geo {
  int64_t in_h, in_w, c, pool_h, pool_w, stride_h, stride_w, pad_h, pad_w,
      out_h, out_w;
};

Geo ToGeo(const Pool2DGeometry& g) {
  return Geo{g.in_h,     g.in_w,  g.channels, g.pool_h, g.pool_w, g.stride_h,
             g.stride_w, g.pad_h, g.pad_w,    g.out_h,  g.out_w};
}

// The output windows [oh0, oh1] x [ow0, ow1] that hold the input cell at
// `within` (its index in a sample's H*W*C values).
struct Span {
  int64_t oh0, oh1, ow0, ow1;
};

__device__ Span WindowsHolding(const Geo& g, int64_t within) {
  // In padded coordinates (the window of oh starts at oh * stride_h).
  const int64_t iw = (within / g.c) % g.in_w + g.pad_w;
  const int64_t ih = within / (g.c * g.in_w) + g.pad_h;
  // Windows oh with oh * stride_h <= ih < oh * stride_h + pool_h.
  Span s;
  s.oh0 = ih - g.pool_h + 1 > 0
              ? (ih - g.pool_h + 1 + g.stride_h - 1) / g.stride_h
              : 0;
  s.oh1 = ih / g.stride_h;
  if (s.oh1 > g.out_h - 1) s.oh1 = g.out_h - 1;
  s.ow0 = iw - g.pool_w + 1 > 0
              ? (iw - g.pool_w + 1 + g.stride_w - 1) / g.stride_w
              : 0;
  s.ow1 = iw / g.stride_w;
  if (s.ow1 > g.out_w - 1) s.ow1 = g.out_w - 1;
  return s;
}

__global__ void ForwardKernel(Geo g, int64_t total, const float* x, float* y,
                              int32_t* argmax) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ch = i % g.c;
    const int64_t ow = (i / g.c) % g.out_w;
    const int64_t oh = (i / (g.c * g.out_w)) % g.out_h;
    const int64_t n = i / (g.c * g.out_w * g.out_h);
    const float* img = x + n * g.in_h * g.in_w * g.c;
    // The window's cells inside the input (padded cells never win), in
    // the CPU's order.
    const int64_t h = oh * g.stride_h - g.pad_h, w = ow * g.stride_w - g.pad_w;
    const int64_t ih0 = h < 0 ? 0 : h, iw0 = w < 0 ? 0 : w;
    const int64_t ih1 = h + g.pool_h < g.in_h ? h + g.pool_h : g.in_h;
    const int64_t iw1 = w + g.pool_w < g.in_w ? w + g.pool_w : g.in_w;
    int32_t where = static_cast<int32_t>((ih0 * g.in_w + iw0) * g.c + ch);
    float best = img[where];
    for (int64_t ih = ih0; ih < ih1; ++ih) {
      for (int64_t iw = iw0; iw < iw1; ++iw) {
        const int32_t at = static_cast<int32_t>((ih * g.in_w + iw) * g.c + ch);
        if (img[at] > best) best = img[at], where = at;
      }
    }
    y[i] = best;
    argmax[i] = where;
  }
}

// dx at input (n, ih, iw, ch): the dy of every window containing it whose
// argmax is this element, in increasing (oh, ow) order like the CPU's
// scatter. Disjoint windows store the single value (the CPU writes it, so a
// -0.0f stays -0.0f); overlapping ones start from 0.0f and add.
__global__ void BackwardKernel(Geo g, int64_t total, bool disjoint,
                               const float* dy, const int32_t* argmax,
                               float* dx) {
  const int64_t in_size = g.in_h * g.in_w * g.c;
  const int64_t out_size = g.out_h * g.out_w * g.c;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = i / in_size;
    const int64_t within = i % in_size;
    const int64_t ch = within % g.c;
    const Span w = WindowsHolding(g, within);
    float acc = 0.0f;
    for (int64_t oh = w.oh0; oh <= w.oh1; ++oh) {
      for (int64_t ow = w.ow0; ow <= w.ow1; ++ow) {
        const int64_t o = n * out_size + (oh * g.out_w + ow) * g.c + ch;
        if (argmax[o] == within) {
          if (disjoint) {
            acc = dy[o];
          } else {
            acc += dy[o];
          }
        }
      }
    }
    dx[i] = acc;
  }
}

// The window of output (oh, ow) clipped to the input, and its divisor.
struct Window {
  int64_t ih0, ih1, iw0, iw1;
  float count;
};

__device__ Window WindowAt(const Geo& g, bool count_include_pad, int64_t oh,
                           int64_t ow) {
  const int64_t h = oh * g.stride_h - g.pad_h, w = ow * g.stride_w - g.pad_w;
  Window win;
  win.ih0 = h < 0 ? 0 : h;
  win.iw0 = w < 0 ? 0 : w;
  win.ih1 = h + g.pool_h < g.in_h ? h + g.pool_h : g.in_h;
  win.iw1 = w + g.pool_w < g.in_w ? w + g.pool_w : g.in_w;
  win.count = static_cast<float>(count_include_pad ? g.pool_h * g.pool_w
                                                   : (win.ih1 - win.ih0) *
                                                         (win.iw1 - win.iw0));
  return win;
}

__global__ void AvgForwardKernel(Geo g, bool count_include_pad, int64_t total,
                                 const float* x, float* y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ch = i % g.c;
    const int64_t ow = (i / g.c) % g.out_w;
    const int64_t oh = (i / (g.c * g.out_w)) % g.out_h;
    const int64_t n = i / (g.c * g.out_w * g.out_h);
    const float* img = x + n * g.in_h * g.in_w * g.c + ch;
    const Window win = WindowAt(g, count_include_pad, oh, ow);
    float acc = 0.0f;
    for (int64_t ih = win.ih0; ih < win.ih1; ++ih) {
      for (int64_t iw = win.iw0; iw < win.iw1; ++iw) {
        acc = __fadd_rn(acc, img[(ih * g.in_w + iw) * g.c]);
      }
    }
    y[i] = __fdiv_rn(acc, win.count);
  }
}

__global__ void AvgBackwardKernel(Geo g, bool count_include_pad, int64_t total,
                                  const float* dy, float* dx) {
  const int64_t in_size = g.in_h * g.in_w * g.c;
  const int64_t out_size = g.out_h * g.out_w * g.c;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = i / in_size;
    const int64_t within = i % in_size;
    const int64_t ch = within % g.c;
    const Span w = WindowsHolding(g, within);
    float acc = 0.0f;
    for (int64_t oh = w.oh0; oh <= w.oh1; ++oh) {
      for (int64_t ow = w.ow0; ow <= w.ow1; ++ow) {
        const Window win = WindowAt(g, count_include_pad, oh, ow);
        const float v = dy[n * out_size + (oh * g.out_w + ow) * g.c + ch];
        acc = __fadd_rn(acc, __fdiv_rn(v, win.count));
      }
    }
    dx[i] = acc;
  }
}

__global__ void GlobalAvgForwardKernel(int64_t hw, int64_t c, int64_t total,
                                       const float* x, float* y) {
  const float count = static_cast<float>(hw);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = i / c, ch = i % c;
    const float* img = x + n * hw * c + ch;
    float acc = 0.0f;
    for (int64_t p = 0; p < hw; ++p) acc = __fadd_rn(acc, img[p * c]);
    y[i] = __fdiv_rn(acc, count);
  }
}

__global__ void GlobalAvgBackwardKernel(int64_t hw, int64_t c, int64_t total,
                                        const float* dy, float* dx) {
  const float count = static_cast<float>(hw);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ch = i % c, n = i / (hw * c);
    dx[i] = __fdiv_rn(dy[n * c + ch], count);
  }
}

}  // namespace

cudaError_t GlobalAvgPool2DForward(int64_t n, int64_t hw, int64_t c,
                                   const float* x, float* y,
                                   cudaStream_t stream) {
  const int64_t total = n * c;
  if (total <= 0) return cudaSuccess;
  GlobalAvgForwardKernel<<<Blocks(total), kThreads, 0, stream>>>(hw, c, total,
                                                                 x, y);
  return cudaGetLastError();
}

cudaError_t GlobalAvgPool2DBackward(int64_t n, int64_t hw, int64_t c,
                                    const float* dy, float* dx,
                                    cudaStream_t stream) {
  const int64_t total = n * hw * c;
  if (total <= 0) return cudaSuccess;
  GlobalAvgBackwardKernel<<<Blocks(total), kThreads, 0, stream>>>(
      hw, c, total, dy, dx);
  return cudaGetLastError();
}

cudaError_t AvgPool2DForward(const Pool2DGeometry& g, bool count_include_pad,
                             const float* x, float* y, cudaStream_t stream) {
  const int64_t total = g.batch * g.out_size();
  if (total <= 0) return cudaSuccess;
  AvgForwardKernel<<<Blocks(total), kThreads, 0, stream>>>(
      ToGeo(g), count_include_pad, total, x, y);
  return cudaGetLastError();
}

cudaError_t AvgPool2DBackward(const Pool2DGeometry& g, bool count_include_pad,
                              const float* dy, float* dx, cudaStream_t stream) {
  const int64_t total = g.batch * g.in_size();
  if (total <= 0) return cudaSuccess;
  AvgBackwardKernel<<<Blocks(total), kThreads, 0, stream>>>(
      ToGeo(g), count_include_pad, total, dy, dx);
  return cudaGetLastError();
}

cudaError_t MaxPool2DForward(const Pool2DGeometry& g, const float* x, float* y,
                             int32_t* argmax, cudaStream_t stream) {
  const int64_t total = g.batch * g.out_size();
  if (total <= 0) return cudaSuccess;
  ForwardKernel<<<Blocks(total), kThreads, 0, stream>>>(ToGeo(g), total, x, y,
                                                        argmax);
  return cudaGetLastError();
}

cudaError_t MaxPool2DBackward(const Pool2DGeometry& g, const float* dy,
                              const int32_t* argmax, float* dx,
                              cudaStream_t stream) {
  const int64_t total = g.batch * g.in_size();
  if (total <= 0) return cudaSuccess;
  const bool disjoint = g.disjoint();
  BackwardKernel<<<Blocks(total), kThreads, 0, stream>>>(
      ToGeo(g), total, disjoint, dy, argmax, dx);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace lockstep
