// Depthwise convolution kernels: grid-stride loops, each thread summing in
// the CPU's order (see depthwise.h).
#include "kernels/cpu/depthwise.h"
#include "kernels/cuda/grid_stride.cuh"
#include "kernels/cuda/layers/depthwise.h"

namespace lockstep {
namespace cuda {
namespace {

// The geometry by value (Conv2DGeometry has a host-only static).
struct Geo {
  int64_t batch, in_h, in_w, c, k_h, k_w, cm, stride_h, stride_w, pad_top,
      pad_left, out_h, out_w;
};

Geo ToGeo(const Conv2DGeometry& g) {
  return Geo{g.batch,    g.in_h,     g.in_w,    g.in_c,    g.k_h,
             g.k_w,      g.filters,  g.stride_h, g.stride_w, g.pad_top,
             g.pad_left, g.out_h,    g.out_w};
}

__global__ void ForwardKernel(Geo g, int64_t total, const float* x,
                              const float* kernel, const float* bias,
                              float* y) {
  const int64_t mult = g.cm / g.c;
  for (int64_t i = FirstIndex(); i < total; i += Stride()) {
    const int64_t o = i % g.cm;
    const int64_t ow = (i / g.cm) % g.out_w;
    const int64_t oh = (i / (g.cm * g.out_w)) % g.out_h;
    const int64_t n = i / (g.cm * g.out_w * g.out_h);
    const float* img = x + n * g.in_h * g.in_w * g.c + o / mult;
    float acc = bias != nullptr ? bias[o] : 0.0f;
    for (int64_t kh = 0; kh < g.k_h; ++kh) {
      const int64_t ih = oh * g.stride_h - g.pad_top + kh;
      if (ih < 0 || ih >= g.in_h) continue;
      for (int64_t kw = 0; kw < g.k_w; ++kw) {
        const int64_t iw = ow * g.stride_w - g.pad_left + kw;
        if (iw < 0 || iw >= g.in_w) continue;
        acc += img[(ih * g.in_w + iw) * g.c] * kernel[(kh * g.k_w + kw) * g.cm + o];
      }
    }
    y[i] = acc;
  }
}

// One thread per kernel element (tap, o): each block of rows summed in row
// order, the blocks added in order, as the CPU's partials.
__global__ void KernelGradKernel(Geo g, int64_t total, const float* x,
                                 const float* dy, float* dkernel) {
  const int64_t mult = g.cm / g.c;
  const int64_t rows = g.batch * g.out_h * g.out_w;
  for (int64_t i = FirstIndex(); i < total; i += Stride()) {
    const int64_t o = i % g.cm, tap = i / g.cm;
    const int64_t kh = tap / g.k_w, kw = tap % g.k_w;
    float sum = 0.0f;
    for (int64_t b0 = 0; b0 < rows; b0 += kDepthwiseRowBlock) {
      const int64_t b1 =
          b0 + kDepthwiseRowBlock < rows ? b0 + kDepthwiseRowBlock : rows;
      float part = 0.0f;
      for (int64_t r = b0; r < b1; ++r) {
        const int64_t ow = r % g.out_w, oh = (r / g.out_w) % g.out_h;
        const int64_t n = r / (g.out_w * g.out_h);
        const int64_t ih = oh * g.stride_h - g.pad_top + kh;
        const int64_t iw = ow * g.stride_w - g.pad_left + kw;
        if (ih < 0 || ih >= g.in_h || iw < 0 || iw >= g.in_w) continue;
        part += x[((n * g.in_h + ih) * g.in_w + iw) * g.c + o / mult] *
                dy[r * g.cm + o];
      }
      sum += part;
    }
    dkernel[i] = sum;
  }
}

// One thread per input element: the taps that read it in (kh, kw) order,
// its multipliers in order.
__global__ void InputGradKernel(Geo g, int64_t total, const float* kernel,
                                const float* dy, float* dx) {
  const int64_t mult = g.cm / g.c;
  for (int64_t i = FirstIndex(); i < total; i += Stride()) {
    const int64_t ci = i % g.c;
    const int64_t iw = (i / g.c) % g.in_w;
    const int64_t ih = (i / (g.c * g.in_w)) % g.in_h;
    const int64_t n = i / (g.c * g.in_w * g.in_h);
    float acc = 0.0f;
    for (int64_t kh = 0; kh < g.k_h; ++kh) {
      const int64_t t = ih + g.pad_top - kh;
      if (t < 0 || t % g.stride_h != 0 || t / g.stride_h >= g.out_h) continue;
      for (int64_t kw = 0; kw < g.k_w; ++kw) {
        const int64_t u = iw + g.pad_left - kw;
        if (u < 0 || u % g.stride_w != 0 || u / g.stride_w >= g.out_w) {
          continue;
        }
        const float* d =
            dy + ((n * g.out_h + t / g.stride_h) * g.out_w + u / g.stride_w) *
                     g.cm;
        const float* k = kernel + (kh * g.k_w + kw) * g.cm;
        for (int64_t m = 0; m < mult; ++m) {
          acc += d[ci * mult + m] * k[ci * mult + m];
        }
      }
    }
    dx[i] = acc;
  }
}

}  // namespace

cudaError_t DepthwiseConv2DForward(const Conv2DGeometry& g, const float* x,
                                   const float* kernel, const float* bias,
                                   float* y, cudaStream_t stream) {
  const int64_t total = g.rows() * g.filters;
  if (total <= 0) return cudaSuccess;
  ForwardKernel<<<Blocks(total), kThreads, 0, stream>>>(ToGeo(g), total, x,
                                                        kernel, bias, y);
  return cudaGetLastError();
}

cudaError_t DepthwiseConv2DBackward(const Conv2DGeometry& g, const float* x,
                                    const float* kernel, const float* dy,
                                    float* dkernel, float* dx,
                                    cudaStream_t stream) {
  const int64_t ksize = g.k_h * g.k_w * g.filters;
  if (ksize > 0) {
    KernelGradKernel<<<Blocks(ksize), kThreads, 0, stream>>>(ToGeo(g), ksize,
                                                             x, dy, dkernel);
  }
  const int64_t in_total = g.batch * g.in_h * g.in_w * g.in_c;
  if (dx != nullptr && in_total > 0) {
    InputGradKernel<<<Blocks(in_total), kThreads, 0, stream>>>(
        ToGeo(g), in_total, kernel, dy, dx);
  }
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace lockstep
