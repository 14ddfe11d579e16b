// im2col copies whole contiguous runs: in NHWC the KW*C values of one kernel
// row are adjacent in memory whenever the window row lies inside the image.
#include "kernels/cpu/conv.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

constexpr int64_t kCopyGrain = 1 << 14;  // floats per ParallelFor range
// Floats of patches plus outputs per fused forward block: well inside L2, so
// im2col, the GEMM and the activation pass each find the block in cache.
constexpr int64_t kFusedBlockFloats = 1 << 15;

// Rows of the patch matrix per block.
int64_t BlockRows(const Conv2DGeometry& g, const ConvWorkspace& ws) {
  return std::max<int64_t>(
      1, std::min(g.rows(),
                  ws.max_patch_floats / std::max<int64_t>(g.patch_size(), 1)));
}

float* Grow(std::vector<float>* v, int64_t n) {
  if (static_cast<int64_t>(v->size()) < n) v->resize(n);
  return v->data();
}

}  // namespace

int64_t ConvOutputSize(int64_t in, int64_t k, int64_t stride, bool same) {
  if (same) return (in + stride - 1) / stride;
  if (k > in) return 0;
  return (in - k) / stride + 1;
}

int64_t ConvPadBefore(int64_t in, int64_t k, int64_t stride, bool same) {
  if (!same) return 0;
  const int64_t out = ConvOutputSize(in, k, stride, true);
  const int64_t total = std::max<int64_t>((out - 1) * stride + k - in, 0);
  return total / 2;
}

Conv2DGeometry Conv2DGeometry::Make(int64_t batch, int64_t in_h, int64_t in_w,
                                    int64_t in_c, int64_t k_h, int64_t k_w,
                                    int64_t filters, int64_t stride_h,
                                    int64_t stride_w, bool same, int64_t dil_h,
                                    int64_t dil_w) {
  Conv2DGeometry g;
  g.batch = batch;
  g.in_h = in_h;
  g.in_w = in_w;
  g.in_c = in_c;
  g.k_h = k_h;
  g.k_w = k_w;
  g.filters = filters;
  g.stride_h = stride_h;
  g.stride_w = stride_w;
  g.dil_h = dil_h;
  g.dil_w = dil_w;
  g.out_h = ConvOutputSize(in_h, g.span_h(), stride_h, same);
  g.out_w = ConvOutputSize(in_w, g.span_w(), stride_w, same);
  g.pad_top = ConvPadBefore(in_h, g.span_h(), stride_h, same);
  g.pad_left = ConvPadBefore(in_w, g.span_w(), stride_w, same);
  return g;
}

void Im2Col(const Conv2DGeometry& g, const float* x, int64_t row_begin,
            int64_t row_end, float* patches) {
  const int64_t c = g.in_c, kwc = g.k_w * c, p = g.patch_size();
  const int64_t pixels = g.out_h * g.out_w;
  ParallelFor(row_end - row_begin, std::max<int64_t>(1, kCopyGrain / p),
              [&](int64_t b, int64_t e) {
                for (int64_t r = row_begin + b; r < row_begin + e; ++r) {
                  const int64_t n = r / pixels, pix = r % pixels;
                  const int64_t ih0 = (pix / g.out_w) * g.stride_h - g.pad_top;
                  const int64_t iw0 = (pix % g.out_w) * g.stride_w - g.pad_left;
                  const float* img = x + n * g.in_h * g.in_w * c;
                  float* out = patches + (r - row_begin) * p;
                  // Undilated taps inside the input: one run a row.
                  const bool cols_inside =
                      g.dil_w == 1 && iw0 >= 0 && iw0 + g.k_w <= g.in_w;
                  for (int64_t kh = 0; kh < g.k_h; ++kh, out += kwc) {
                    const int64_t ih = ih0 + kh * g.dil_h;
                    if (ih < 0 || ih >= g.in_h) {
                      std::memset(out, 0, sizeof(float) * kwc);
                      continue;
                    }
                    const float* src = img + (ih * g.in_w + iw0) * c;
                    if (cols_inside) {
                      if (kwc < 16) {  // e.g. one channel: skip the call
                        for (int64_t i = 0; i < kwc; ++i) out[i] = src[i];
                      } else {
                        std::memcpy(out, src, sizeof(float) * kwc);
                      }
                      continue;
                    }
                    for (int64_t kw = 0; kw < g.k_w; ++kw) {
                      const int64_t iw = iw0 + kw * g.dil_w;
                      if (iw < 0 || iw >= g.in_w) {
                        std::memset(out + kw * c, 0, sizeof(float) * c);
                      } else {
                        std::memcpy(out + kw * c, src + kw * g.dil_w * c,
                                    sizeof(float) * c);
                      }
                    }
                  }
                }
              });
}

void Col2Im(const Conv2DGeometry& g, const float* dpatches, int64_t row_begin,
            int64_t row_end, float* dx) {
  if (row_end <= row_begin) return;
  const int64_t c = g.in_c, kwc = g.k_w * c, p = g.patch_size();
  const int64_t pixels = g.out_h * g.out_w;
  // Windows of one sample overlap, so each range owns whole samples: the
  // writes are disjoint and the summation order fixed.
  const int64_t n_first = row_begin / pixels;
  const int64_t n_last = (row_end - 1) / pixels;
  ParallelFor(
      n_last - n_first + 1,
      std::max<int64_t>(1, kCopyGrain / std::max<int64_t>(pixels * p, 1)),
      [&](int64_t b, int64_t e) {
        const int64_t r0 = std::max(row_begin, (n_first + b) * pixels);
        const int64_t r1 = std::min(row_end, (n_first + e) * pixels);
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t n = r / pixels, pix = r % pixels;
          const int64_t ih0 = (pix / g.out_w) * g.stride_h - g.pad_top;
          const int64_t iw0 = (pix % g.out_w) * g.stride_w - g.pad_left;
          float* img = dx + n * g.in_h * g.in_w * c;
          const float* in = dpatches + (r - row_begin) * p;
          const bool cols_inside =
              g.dil_w == 1 && iw0 >= 0 && iw0 + g.k_w <= g.in_w;
          for (int64_t kh = 0; kh < g.k_h; ++kh, in += kwc) {
            const int64_t ih = ih0 + kh * g.dil_h;
            if (ih < 0 || ih >= g.in_h) continue;
            float* dst = img + (ih * g.in_w + iw0) * c;
            if (cols_inside) {
              for (int64_t i = 0; i < kwc; ++i) dst[i] += in[i];
              continue;
            }
            for (int64_t kw = 0; kw < g.k_w; ++kw) {
              const int64_t iw = iw0 + kw * g.dil_w;
              if (iw < 0 || iw >= g.in_w) continue;
              float* d = dst + kw * g.dil_w * c;
              for (int64_t i = 0; i < c; ++i) d[i] += in[kw * c + i];
            }
          }
        }
      });
}

void Conv2DForward(const Conv2DGeometry& g, const float* x, const float* kernel,
                   const float* bias, ActivationKind act, float* y,
                   ConvWorkspace* ws) {
  ws->holds_all_patches = false;
  const int64_t rows = g.rows(), p = g.patch_size(), f = g.filters;
  if (rows <= 0 || f <= 0) return;
  const bool pointwise = g.is_pointwise();
  const int64_t block = pointwise ? rows : BlockRows(g, *ws);
  float* patches = pointwise ? nullptr : Grow(&ws->patches, block * p);
  const int64_t sub =
      std::max<int64_t>(1, kFusedBlockFloats / std::max<int64_t>(p + f, 1));
  for (int64_t r0 = 0; r0 < rows; r0 += block) {
    const int64_t r1 = std::min(rows, r0 + block);
    // Each range owns whole sub-blocks of rows: its own patches and outputs.
    ParallelFor((r1 - r0 + sub - 1) / sub, 1, [&](int64_t b, int64_t e) {
      for (int64_t s0 = r0 + b * sub; s0 < std::min(r1, r0 + e * sub);
           s0 += sub) {
        const int64_t s1 = std::min(r1, s0 + sub);
        const float* src = x + s0 * p;  // pointwise: x is the patch matrix
        if (!pointwise) {
          float* dst = patches + (s0 - r0) * p;
          Im2Col(g, x, s0, s1, dst);
          src = dst;
        }
        // The bias goes in first so the GEMM accumulates onto it (beta = 1)
        // instead of OpenBLAS zeroing the block (beta = 0) and a bias pass.
        float* out = y + s0 * f;
        for (int64_t r = 0; r < s1 - s0; ++r) {
          if (bias != nullptr) {
            std::copy(bias, bias + f, out + r * f);
          } else {
            std::fill(out + r * f, out + (r + 1) * f, 0.0f);
          }
        }
        Gemm(g.precision, false, false, s1 - s0, f, p, 1.0f, src, kernel, 1.0f,
             out);
        BiasActivationForward(s1 - s0, f, nullptr, act, out);
      }
    });
  }
  ws->holds_all_patches = !pointwise && block >= rows;
}

void Conv2DBackward(const Conv2DGeometry& g, const float* x,
                    const float* kernel, const float* dy, float* dkernel,
                    float* dbias, float* dx, ConvWorkspace* ws) {
  const int64_t rows = g.rows(), p = g.patch_size(), f = g.filters;
  if (dbias != nullptr) BiasGrad(rows, f, dy, dbias);
  if (dx != nullptr) {
    std::fill(dx, dx + g.batch * g.in_h * g.in_w * g.in_c, 0.0f);
  }
  if (rows <= 0) {
    std::fill(dkernel, dkernel + p * f, 0.0f);
    return;
  }
  if (g.is_pointwise()) {
    // dK = x^T dy; dx = dy K^T.
    Gemm(g.precision, true, false, p, f, rows, 1.0f, x, dy, 0.0f, dkernel);
    if (dx != nullptr)
      Gemm(g.precision, false, true, rows, p, f, 1.0f, dy, kernel, 0.0f, dx);
    return;
  }
  const int64_t block = BlockRows(g, *ws);
  const bool reuse = ws->holds_all_patches && block >= rows &&
                     static_cast<int64_t>(ws->patches.size()) >= rows * p;
  float* patches = Grow(&ws->patches, block * p);
  float* dpatches = dx != nullptr ? Grow(&ws->dpatches, block * p) : nullptr;
  for (int64_t r0 = 0; r0 < rows; r0 += block) {
    const int64_t r1 = std::min(rows, r0 + block);
    if (!reuse) Im2Col(g, x, r0, r1, patches);
    // dK (+)= patches^T dy.
    Gemm(g.precision, true, false, p, f, r1 - r0, 1.0f, patches, dy + r0 * f,
         r0 == 0 ? 0.0f : 1.0f, dkernel);
    if (dx != nullptr) {
      Gemm(g.precision, false, true, r1 - r0, p, f, 1.0f, dy + r0 * f, kernel,
           0.0f, dpatches);
      Col2Im(g, dpatches, r0, r1, dx);
    }
  }
  // Blocks overwrote the patches unless there was one.
  ws->holds_all_patches = ws->holds_all_patches && reuse;
}

namespace {

// torch [F, C, T] <-> Keras [T, C, F] (T = KH * KW taps): the transpose of
// an F x (C * T) matrix whose column (ci, t) becomes row (t, ci). Done in
// 32 x 32 tiles so reads and writes each stay within a few cache lines
// (a resnet18's kernels are 11M floats, converted every step), split over
// the filters; a pure permutation, so any split gives the same bytes.
template <bool kToKeras>
void PermuteConvKernel(int64_t f, int64_t c, int64_t taps, const float* src,
                       float* dst) {
  constexpr int64_t kTile = 32;
  const int64_t cols = c * taps;
  const int64_t blocks = (f + kTile - 1) / kTile;
  ParallelFor(
      blocks,
      std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(kTile * cols, 1)),
      [&](int64_t b, int64_t e) {
        for (int64_t fb = b * kTile; fb < std::min(f, e * kTile); fb += kTile) {
          const int64_t fe = std::min(f, fb + kTile);
          for (int64_t jb = 0; jb < cols; jb += kTile) {
            const int64_t je = std::min(cols, jb + kTile);
            for (int64_t j = jb; j < je; ++j) {
              const int64_t ci = j / taps, t = j % taps;
              const int64_t row = (t * c + ci) * f;  // Keras row
              for (int64_t fi = fb; fi < fe; ++fi) {
                if (kToKeras) {
                  dst[row + fi] = src[fi * cols + j];
                } else {
                  dst[fi * cols + j] = src[row + fi];
                }
              }
            }
          }
        }
      });
}

}  // namespace

void TorchToKerasConvKernel(int64_t f, int64_t c, int64_t kh, int64_t kw,
                            const float* torch, float* keras) {
  PermuteConvKernel<true>(f, c, kh * kw, torch, keras);
}

void KerasToTorchConvKernel(int64_t f, int64_t c, int64_t kh, int64_t kw,
                            const float* keras, float* torch) {
  PermuteConvKernel<false>(f, c, kh * kw, keras, torch);
}

void NhwcToNchw(int64_t n, int64_t hw, int64_t c, const float* x, float* y) {
  for (int64_t s = 0; s < n; ++s, x += hw * c, y += hw * c)
    for (int64_t p = 0; p < hw; ++p)
      for (int64_t ci = 0; ci < c; ++ci) y[ci * hw + p] = x[p * c + ci];
}

void NchwToNhwc(int64_t n, int64_t hw, int64_t c, const float* x, float* y) {
  for (int64_t s = 0; s < n; ++s, x += hw * c, y += hw * c)
    for (int64_t p = 0; p < hw; ++p)
      for (int64_t ci = 0; ci < c; ++ci) y[p * c + ci] = x[ci * hw + p];
}

}  // namespace lockstep
