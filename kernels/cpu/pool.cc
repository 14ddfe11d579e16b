// The channel dimension is innermost, so every comparison runs over C
// contiguous values: SSE4.1 (in the x86-64-v2 baseline) four at a time, with
// a scalar tail and fallback.
#include "kernels/cpu/pool.h"

#include <algorithm>

#ifdef __SSE4_1__
#include <smmintrin.h>
#endif

#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {
constexpr int64_t kGrain = 1 << 14;  // input floats per ParallelFor range
}  // namespace

Pool2DGeometry Pool2DGeometry::Make(int64_t batch, int64_t in_h, int64_t in_w,
                                    int64_t channels, int64_t pool_h,
                                    int64_t pool_w, int64_t stride_h,
                                    int64_t stride_w, int64_t pad_h,
                                    int64_t pad_w) {
  Pool2DGeometry g;
  g.batch = batch;
  g.in_h = in_h;
  g.in_w = in_w;
  g.channels = channels;
  g.pool_h = pool_h;
  g.pool_w = pool_w;
  g.stride_h = stride_h;
  g.stride_w = stride_w;
  g.pad_h = pad_h;
  g.pad_w = pad_w;
  const int64_t h = in_h + 2 * pad_h, w = in_w + 2 * pad_w;
  g.out_h = pool_h > h ? 0 : (h - pool_h) / stride_h + 1;
  g.out_w = pool_w > w ? 0 : (w - pool_w) / stride_w + 1;
  return g;
}

void MaxPool2DForward(const Pool2DGeometry& g, const float* x, float* y,
                      int32_t* argmax) {
  const int64_t c = g.channels, rows = g.batch * g.out_h;
  if (g.out_size() == 0) return;
  const int64_t grain = std::max<int64_t>(
      1, kGrain / std::max<int64_t>(g.out_w * g.pool_h * g.pool_w * c, 1));
  // One range item is one output row (sample n, output row oh). Each window's
  // running max and argmax stay in registers, four channels at a time.
  ParallelFor(rows, grain, [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      const int64_t n = row / g.out_h, oh = row % g.out_h;
      const float* img = x + n * g.in_size();
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        float* out = y + (row * g.out_w + ow) * c;
        int32_t* arg = argmax + (row * g.out_w + ow) * c;
        const int64_t ih0 = g.row_begin(oh), ih1 = g.row_end(oh);
        const int64_t iw0 = g.col_begin(ow), iw1 = g.col_end(ow);
        int64_t ch = 0;
#ifdef __SSE4_1__
        for (; ch + 4 <= c; ch += 4) {
          const int32_t first =
              static_cast<int32_t>((ih0 * g.in_w + iw0) * c + ch);
          const __m128i lanes = _mm_setr_epi32(0, 1, 2, 3);
          __m128 best = _mm_loadu_ps(img + first);
          __m128i where = _mm_add_epi32(_mm_set1_epi32(first), lanes);
          for (int64_t ih = ih0; ih < ih1; ++ih) {
            for (int64_t iw = iw0; iw < iw1; ++iw) {
              const int32_t at =
                  static_cast<int32_t>((ih * g.in_w + iw) * c + ch);
              const __m128 v = _mm_loadu_ps(img + at);
              const __m128 more = _mm_cmpgt_ps(v, best);
              best = _mm_blendv_ps(best, v, more);
              where = _mm_castps_si128(_mm_blendv_ps(
                  _mm_castsi128_ps(where),
                  _mm_castsi128_ps(_mm_add_epi32(_mm_set1_epi32(at), lanes)),
                  more));
            }
          }
          _mm_storeu_ps(out + ch, best);
          _mm_storeu_si128(reinterpret_cast<__m128i*>(arg + ch), where);
        }
#endif
        for (; ch < c; ++ch) {
          int32_t where = static_cast<int32_t>((ih0 * g.in_w + iw0) * c + ch);
          float best = img[where];
          for (int64_t ih = ih0; ih < ih1; ++ih) {
            for (int64_t iw = iw0; iw < iw1; ++iw) {
              const int32_t at =
                  static_cast<int32_t>((ih * g.in_w + iw) * c + ch);
              if (img[at] > best) best = img[at], where = at;
            }
          }
          out[ch] = best;
          arg[ch] = where;
        }
      }
    }
  });
}

void MaxPool2DBackward(const Pool2DGeometry& g, const float* dy,
                       const int32_t* argmax, float* dx) {
  const int64_t in = g.in_size(), out = g.out_size(), c = g.channels;
  const bool disjoint = g.disjoint();
  ParallelFor(
      g.batch, std::max<int64_t>(1, kGrain / std::max<int64_t>(in, 1)),
      [&](int64_t b, int64_t e) {
        if (!disjoint) {
          // Overlapping windows: zero, then scatter-add in a fixed order.
          std::fill(dx + b * in, dx + e * in, 0.0f);
          for (int64_t n = b; n < e; ++n) {
            float* d = dx + n * in;
            const float* g_out = dy + n * out;
            const int32_t* a = argmax + n * out;
            for (int64_t i = 0; i < out; ++i) d[a[i]] += g_out[i];
          }
          return;
        }
        // Disjoint windows: write every dx value once (no zero pass).
        for (int64_t n = b; n < e; ++n) {
          float* d = dx + n * in;
          if (g.stride_h > g.pool_h || g.stride_w > g.pool_w ||
              g.out_h * g.pool_h < g.in_h || g.out_w * g.pool_w < g.in_w) {
            std::fill(d, d + in, 0.0f);  // gaps no window covers
          }
          for (int64_t oh = 0; oh < g.out_h; ++oh) {
            for (int64_t ow = 0; ow < g.out_w; ++ow) {
              const int64_t o = ((n * g.out_h + oh) * g.out_w + ow) * c;
              const float* __restrict gy = dy + o;
              const int32_t* __restrict a = argmax + o;
              for (int64_t ph = 0; ph < g.pool_h; ++ph) {
                for (int64_t pw = 0; pw < g.pool_w; ++pw) {
                  const int32_t base = static_cast<int32_t>(
                      ((oh * g.stride_h + ph) * g.in_w + ow * g.stride_w + pw) *
                      c);
                  float* dd = d + base;
                  int64_t ch = 0;
#ifdef __SSE4_1__
                  const __m128i lanes = _mm_setr_epi32(0, 1, 2, 3);
                  for (; ch + 4 <= c; ch += 4) {
                    const __m128i idx = _mm_add_epi32(
                        _mm_set1_epi32(base + static_cast<int32_t>(ch)), lanes);
                    const __m128i hit = _mm_cmpeq_epi32(
                        _mm_loadu_si128(
                            reinterpret_cast<const __m128i*>(a + ch)),
                        idx);
                    _mm_storeu_ps(dd + ch, _mm_and_ps(_mm_loadu_ps(gy + ch),
                                                      _mm_castsi128_ps(hit)));
                  }
#endif
                  for (; ch < c; ++ch) {
                    dd[ch] = a[ch] == base + static_cast<int32_t>(ch) ? gy[ch]
                                                                      : 0.0f;
                  }
                }
              }
            }
          }
        }
      });
}

void AvgPool2DForward(const Pool2DGeometry& g, bool count_include_pad,
                      const float* x, float* y) {
  const int64_t c = g.channels, rows = g.batch * g.out_h;
  if (g.out_size() == 0) return;
  const int64_t grain = std::max<int64_t>(
      1, kGrain / std::max<int64_t>(g.out_w * g.pool_h * g.pool_w * c, 1));
  // One range item is one output row; a window's C sums stay in y's row.
  ParallelFor(rows, grain, [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      const int64_t n = row / g.out_h, oh = row % g.out_h;
      const float* img = x + n * g.in_size();
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        float* __restrict out = y + (row * g.out_w + ow) * c;
        const int64_t ih0 = g.row_begin(oh), ih1 = g.row_end(oh);
        const int64_t iw0 = g.col_begin(ow), iw1 = g.col_end(ow);
        std::fill(out, out + c, 0.0f);
        for (int64_t ih = ih0; ih < ih1; ++ih) {
          for (int64_t iw = iw0; iw < iw1; ++iw) {
            const float* __restrict at = img + (ih * g.in_w + iw) * c;
            for (int64_t ch = 0; ch < c; ++ch) out[ch] += at[ch];
          }
        }
        const float count =
            static_cast<float>(count_include_pad ? g.pool_h * g.pool_w
                                                 : (ih1 - ih0) * (iw1 - iw0));
        for (int64_t ch = 0; ch < c; ++ch) out[ch] /= count;
      }
    }
  });
}

void AvgPool2DBackward(const Pool2DGeometry& g, bool count_include_pad,
                       const float* dy, float* dx) {
  const int64_t in = g.in_size(), out = g.out_size(), c = g.channels;
  if (g.batch * in == 0) return;
  ParallelFor(g.batch, std::max<int64_t>(1, kGrain / std::max<int64_t>(in, 1)),
              [&](int64_t b, int64_t e) {
                std::fill(dx + b * in, dx + e * in, 0.0f);
                for (int64_t n = b; n < e; ++n) {
                  float* d = dx + n * in;
                  for (int64_t oh = 0; oh < g.out_h; ++oh) {
                    for (int64_t ow = 0; ow < g.out_w; ++ow) {
                      const float* __restrict gy =
                          dy + n * out + (oh * g.out_w + ow) * c;
                      const int64_t ih0 = g.row_begin(oh), ih1 = g.row_end(oh);
                      const int64_t iw0 = g.col_begin(ow), iw1 = g.col_end(ow);
                      const float count = static_cast<float>(
                          count_include_pad ? g.pool_h * g.pool_w
                                            : (ih1 - ih0) * (iw1 - iw0));
                      for (int64_t ih = ih0; ih < ih1; ++ih) {
                        for (int64_t iw = iw0; iw < iw1; ++iw) {
                          float* __restrict at = d + (ih * g.in_w + iw) * c;
                          for (int64_t ch = 0; ch < c; ++ch)
                            at[ch] += gy[ch] / count;
                        }
                      }
                    }
                  }
                }
              });
}

void GlobalAvgPool2DForward(int64_t n, int64_t hw, int64_t c, const float* x,
                            float* y) {
  if (n * c == 0) return;
  const float count = static_cast<float>(hw);
  // One range item is one sample: its C running sums stay in y's row.
  ParallelFor(n, std::max<int64_t>(1, kGrain / std::max<int64_t>(hw * c, 1)),
              [&](int64_t b, int64_t e) {
                for (int64_t s = b; s < e; ++s) {
                  float* out = y + s * c;
                  const float* img = x + s * hw * c;
                  std::fill(out, out + c, 0.0f);
                  for (int64_t p = 0; p < hw; ++p) {
                    const float* at = img + p * c;
                    for (int64_t ch = 0; ch < c; ++ch) out[ch] += at[ch];
                  }
                  for (int64_t ch = 0; ch < c; ++ch) out[ch] /= count;
                }
              });
}

void GlobalAvgPool2DBackward(int64_t n, int64_t hw, int64_t c,
                             const float* dy, float* dx) {
  if (n * hw * c == 0) return;
  const float count = static_cast<float>(hw);
  ParallelFor(n * hw, std::max<int64_t>(1, kGrain / std::max<int64_t>(c, 1)),
              [&](int64_t b, int64_t e) {
                for (int64_t row = b; row < e; ++row) {
                  const float* g = dy + (row / hw) * c;
                  float* out = dx + row * c;
                  for (int64_t ch = 0; ch < c; ++ch) out[ch] = g[ch] / count;
                }
              });
}

}  // namespace lockstep
