// Depthwise convolution: parallel over output rows (forward), fixed row
// blocks (kernel gradient) and samples (input gradient: a sample's windows
// overlap only each other).
#include "kernels/cpu/depthwise.h"

#include <algorithm>

#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

constexpr int64_t kGrain = 1 << 14;  // multiply-adds per ParallelFor range

}  // namespace

void DepthwiseConv2DForward(const Conv2DGeometry& g, const float* x,
                            const float* kernel, const float* bias, float* y) {
  const int64_t c_in = g.in_c, cm = g.filters, mult = cm / c_in;
  const int64_t rows = g.batch * g.out_h;  // one item: a sample's output row
  const int64_t per_row = std::max<int64_t>(g.out_w * cm * g.k_h * g.k_w, 1);
  ParallelFor(rows, std::max<int64_t>(1, kGrain / per_row), [&](int64_t b,
                                                                int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      const int64_t n = row / g.out_h, oh = row % g.out_h;
      const float* img = x + n * g.in_h * g.in_w * c_in;
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        float* out = y + (row * g.out_w + ow) * cm;
        if (bias != nullptr) {
          std::copy(bias, bias + cm, out);
        } else {
          std::fill(out, out + cm, 0.0f);
        }
        for (int64_t kh = 0; kh < g.k_h; ++kh) {
          const int64_t ih = oh * g.stride_h - g.pad_top + kh;
          if (ih < 0 || ih >= g.in_h) continue;
          for (int64_t kw = 0; kw < g.k_w; ++kw) {
            const int64_t iw = ow * g.stride_w - g.pad_left + kw;
            if (iw < 0 || iw >= g.in_w) continue;
            const float* in = img + (ih * g.in_w + iw) * c_in;
            const float* k = kernel + (kh * g.k_w + kw) * cm;
            if (mult == 1) {
              for (int64_t c = 0; c < cm; ++c) out[c] += in[c] * k[c];
            } else {
              for (int64_t c = 0; c < cm; ++c) out[c] += in[c / mult] * k[c];
            }
          }
        }
      }
    }
  });
}

void DepthwiseConv2DBackward(const Conv2DGeometry& g, const float* x,
                             const float* kernel, const float* dy,
                             float* dkernel, float* dx,
                             std::vector<float>* partials) {
  const int64_t c_in = g.in_c, cm = g.filters, mult = cm / c_in;
  const int64_t taps = g.k_h * g.k_w, ksize = taps * cm;
  const int64_t rows = g.rows();  // output pixels, (n, oh, ow) order
  const int64_t blocks = (rows + kDepthwiseRowBlock - 1) / kDepthwiseRowBlock;
  // Kernel gradient: each block sums its rows in order, then the blocks are
  // added in order.
  partials->assign(static_cast<size_t>(std::max<int64_t>(blocks, 1) * ksize),
                   0.0f);
  ParallelFor(blocks, 1, [&](int64_t b, int64_t e) {
    for (int64_t blk = b; blk < e; ++blk) {
      float* acc = partials->data() + blk * ksize;
      const int64_t r1 = std::min(rows, (blk + 1) * kDepthwiseRowBlock);
      for (int64_t r = blk * kDepthwiseRowBlock; r < r1; ++r) {
        const int64_t ow = r % g.out_w, oh = (r / g.out_w) % g.out_h;
        const int64_t n = r / (g.out_w * g.out_h);
        const float* img = x + n * g.in_h * g.in_w * c_in;
        const float* d = dy + r * cm;
        for (int64_t kh = 0; kh < g.k_h; ++kh) {
          const int64_t ih = oh * g.stride_h - g.pad_top + kh;
          if (ih < 0 || ih >= g.in_h) continue;
          for (int64_t kw = 0; kw < g.k_w; ++kw) {
            const int64_t iw = ow * g.stride_w - g.pad_left + kw;
            if (iw < 0 || iw >= g.in_w) continue;
            const float* in = img + (ih * g.in_w + iw) * c_in;
            float* a = acc + (kh * g.k_w + kw) * cm;
            if (mult == 1) {  // the same sums, without a division each
              for (int64_t c = 0; c < cm; ++c) a[c] += in[c] * d[c];
            } else {
              for (int64_t c = 0; c < cm; ++c) a[c] += in[c / mult] * d[c];
            }
          }
        }
      }
    }
  });
  std::fill(dkernel, dkernel + ksize, 0.0f);
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const float* p = partials->data() + blk * ksize;
    for (int64_t i = 0; i < ksize; ++i) dkernel[i] += p[i];
  }
  if (dx == nullptr) return;
  // Input gradient: a gather per input pixel over the windows that contain
  // it, in (kh, kw) order of the tap that reads it; multipliers in order.
  const int64_t in_rows = g.batch * g.in_h;
  ParallelFor(in_rows, 1, [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      const int64_t n = row / g.in_h, ih = row % g.in_h;
      for (int64_t iw = 0; iw < g.in_w; ++iw) {
        float* out = dx + (row * g.in_w + iw) * c_in;
        std::fill(out, out + c_in, 0.0f);
        for (int64_t kh = 0; kh < g.k_h; ++kh) {
          const int64_t t = ih + g.pad_top - kh;  // oh * stride_h
          if (t < 0 || t % g.stride_h != 0) continue;
          const int64_t oh = t / g.stride_h;
          if (oh >= g.out_h) continue;
          for (int64_t kw = 0; kw < g.k_w; ++kw) {
            const int64_t u = iw + g.pad_left - kw;
            if (u < 0 || u % g.stride_w != 0) continue;
            const int64_t ow = u / g.stride_w;
            if (ow >= g.out_w) continue;
            const float* d = dy + ((n * g.out_h + oh) * g.out_w + ow) * cm;
            const float* k = kernel + (kh * g.k_w + kw) * cm;
            if (mult == 1) {
              for (int64_t c = 0; c < cm; ++c) out[c] += d[c] * k[c];
            } else {
              for (int64_t c = 0; c < cm; ++c) out[c / mult] += d[c] * k[c];
            }
          }
        }
      }
    }
  });
}

}  // namespace lockstep
