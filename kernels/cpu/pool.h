// NHWC 2-D max pooling, valid (Keras MaxPooling2D's default) or padded
// symmetrically as PyTorch's MaxPool2d(padding=p): padded cells never win
// (they count as -inf), so a window is its cells inside the input.
// Forward records where each maximum came from so backward is a scatter.
// And global average pooling (the mean over H and W of each channel).
#ifndef LOCKSTEP_KERNELS_CPU_POOL_H_
#define LOCKSTEP_KERNELS_CPU_POOL_H_

#include <cstdint>

namespace lockstep {

struct Pool2DGeometry {
  int64_t batch = 0, in_h = 0, in_w = 0, channels = 0;
  int64_t pool_h = 2, pool_w = 2;
  int64_t stride_h = 2, stride_w = 2;
  int64_t pad_h = 0, pad_w = 0;  // rows / columns before and after
  int64_t out_h = 0, out_w = 0;

  // out = (in + 2 pad - pool) / stride + 1 (0 when pool > in + 2 pad).
  // Every window must hold a real cell: pad <= pool / 2 (PyTorch's rule).
  static Pool2DGeometry Make(int64_t batch, int64_t in_h, int64_t in_w,
                             int64_t channels, int64_t pool_h, int64_t pool_w,
                             int64_t stride_h, int64_t stride_w,
                             int64_t pad_h = 0, int64_t pad_w = 0);
  // The first and one-past-last input row (column) of output row oh
  // (column ow), clipped to the input.
  int64_t row_begin(int64_t oh) const {
    return oh * stride_h - pad_h < 0 ? 0 : oh * stride_h - pad_h;
  }
  int64_t row_end(int64_t oh) const {
    const int64_t e = oh * stride_h - pad_h + pool_h;
    return e > in_h ? in_h : e;
  }
  int64_t col_begin(int64_t ow) const {
    return ow * stride_w - pad_w < 0 ? 0 : ow * stride_w - pad_w;
  }
  int64_t col_end(int64_t ow) const {
    const int64_t e = ow * stride_w - pad_w + pool_w;
    return e > in_w ? in_w : e;
  }
  // Windows tile the input without overlap or padding (backward writes
  // each input once).
  bool disjoint() const {
    return stride_h >= pool_h && stride_w >= pool_w && pad_h == 0 && pad_w == 0;
  }
  int64_t in_size() const { return in_h * in_w * channels; }  // per sample
  int64_t out_size() const { return out_h * out_w * channels; }
};

// y [N, OH, OW, C] = window maxima of x [N, H, W, C]; argmax [N, OH, OW, C]
// gets the index of the (first) maximum within its sample's H*W*C values.
void MaxPool2DForward(const Pool2DGeometry& g, const float* x, float* y,
                      int32_t* argmax);
// Overwrites dx [N, H, W, C] with dy routed to the recorded maxima
// (summed where windows overlap).
void MaxPool2DBackward(const Pool2DGeometry& g, const float* dy,
                       const int32_t* argmax, float* dx);

// y [N, OH, OW, C] = window means of x [N, H, W, C]: each window's cells
// summed in row-major order, then divided by the window's size
// (count_include_pad: pool_h * pool_w, padded cells counting as zeros,
// PyTorch's AvgPool2d default) or by its cells inside the input.
void AvgPool2DForward(const Pool2DGeometry& g, bool count_include_pad,
                      const float* x, float* y);
// Overwrites dx [N, H, W, C] with each window's dy / its divisor added to
// its cells, windows in (oh, ow) order.
void AvgPool2DBackward(const Pool2DGeometry& g, bool count_include_pad,
                       const float* dy, float* dx);

// y [N, C] = the mean over the `hw` positions of x [N, hw, C]: each channel
// summed in position order in float, then divided by hw (kernels/cuda/pool.h
// sums in the same order, so both give the same bits).
void GlobalAvgPool2DForward(int64_t n, int64_t hw, int64_t c, const float* x,
                            float* y);
// Overwrites dx [N, hw, C] with dy [N, C] / hw at every position.
void GlobalAvgPool2DBackward(int64_t n, int64_t hw, int64_t c,
                             const float* dy, float* dx);

}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CPU_POOL_H_
