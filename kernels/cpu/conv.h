// NHWC 2-D convolution by im2col + GEMM. The patch matrix
// [N*OH*OW, KH*KW*C] times the kernel [KH*KW*C, F] (Keras' [KH, KW, C, F]
// layout, read as a matrix) is the NHWC output [N, OH, OW, F] directly.
#ifndef LOCKSTEP_KERNELS_CPU_CONV_H_
#define LOCKSTEP_KERNELS_CPU_CONV_H_

#include <cstdint>
#include <vector>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"

namespace lockstep {

// Output size of one spatial dimension with Keras/TF semantics: valid:
// (in - k) / stride + 1 (0 or less when k > in); same: ceil(in / stride).
int64_t ConvOutputSize(int64_t in, int64_t k, int64_t stride, bool same);
// Padding before (top/left) for 'same': half the total, rounded down, as TF
// (the extra row/column goes after). 0 for valid.
int64_t ConvPadBefore(int64_t in, int64_t k, int64_t stride, bool same);

struct Conv2DGeometry {
  int64_t batch = 0, in_h = 0, in_w = 0, in_c = 0;
  int64_t k_h = 0, k_w = 0, filters = 0;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0;
  int64_t out_h = 0, out_w = 0;
  // Rows (columns) between a kernel's taps: PyTorch's dilation, Keras'
  // dilation_rate. The window spans dil * (k - 1) + 1 cells.
  int64_t dil_h = 1, dil_w = 1;
  // What the convolution's GEMMs round their inputs to (the pass's
  // PassContext::precision; kernels/cpu/gemm.h).
  GemmPrecision precision = GemmPrecision::kFp32;

  // Fills the padding and output size from the rest.
  static Conv2DGeometry Make(int64_t batch, int64_t in_h, int64_t in_w,
                             int64_t in_c, int64_t k_h, int64_t k_w,
                             int64_t filters, int64_t stride_h,
                             int64_t stride_w, bool same, int64_t dil_h = 1,
                             int64_t dil_w = 1);
  int64_t span_h() const { return dil_h * (k_h - 1) + 1; }
  int64_t span_w() const { return dil_w * (k_w - 1) + 1; }
  int64_t patch_size() const { return k_h * k_w * in_c; }
  int64_t rows() const { return batch * out_h * out_w; }  // output pixels
  // A 1x1, stride 1, unpadded conv: the input is its own patch matrix.
  bool is_pointwise() const {
    return k_h == 1 && k_w == 1 && stride_h == 1 && stride_w == 1 &&
           pad_top == 0 && pad_left == 0;
  }
};

// Scratch reused across calls so a steady-state step allocates nothing. The
// patch matrix is built in blocks of rows of at most max_patch_floats floats.
struct ConvWorkspace {
  int64_t max_patch_floats = int64_t{1} << 23;  // 32 MiB
  std::vector<float> patches;
  std::vector<float> dpatches;
  // Set by Conv2DForward when `patches` holds the whole batch's patch matrix
  // (one block), so Conv2DBackward on the same input need not rebuild it.
  bool holds_all_patches = false;
};

// patches[r - row_begin, :] = the patch of output pixel r (zeros where the
// window hangs over the padding), for r in [row_begin, row_end).
void Im2Col(const Conv2DGeometry& g, const float* x, int64_t row_begin,
            int64_t row_end, float* patches);
// The adjoint: dx += each patch row scattered back to its window.
void Col2Im(const Conv2DGeometry& g, const float* dpatches, int64_t row_begin,
            int64_t row_end, float* dx);

// Kernel layouts: PyTorch's [F, C, KH, KW] to Keras' [KH, KW, C, F] and
// back (a depthwise kernel: torch [C*M, 1, KH, KW], Keras [KH, KW, C, M],
// which is c = 1, f = C*M here). Split over ParallelFor's threads.
void TorchToKerasConvKernel(int64_t f, int64_t c, int64_t kh, int64_t kw,
                            const float* torch, float* keras);
void KerasToTorchConvKernel(int64_t f, int64_t c, int64_t kh, int64_t kw,
                            const float* keras, float* torch);

// Feature maps from lockstep's NHWC to PyTorch's NCHW and back: y [N, C,
// HW] from x [N, HW, C] (flatten under param_names "torch", so a dense layer
// after it sees torch's feature order). On the calling thread.
void NhwcToNchw(int64_t n, int64_t hw, int64_t c, const float* x, float* y);
void NchwToNhwc(int64_t n, int64_t hw, int64_t c, const float* x, float* y);

// y [N, OH, OW, F] = act(conv(x [N, H, W, C], kernel [KH, KW, C, F]) + bias).
// bias may be null. Works in blocks of output rows small enough that each
// block's patches and outputs stay in cache from im2col to the activation.
void Conv2DForward(const Conv2DGeometry& g, const float* x, const float* kernel,
                   const float* bias, ActivationKind act, float* y,
                   ConvWorkspace* ws);

// Given dy [N, OH, OW, F], overwrites dkernel, dbias (if not null) and dx (if
// not null) with the gradients. x must be the input of the last
// Conv2DForward that used `ws` with this geometry (its patches are reused).
void Conv2DBackward(const Conv2DGeometry& g, const float* x,
                    const float* kernel, const float* dy, float* dkernel,
                    float* dbias, float* dx, ConvWorkspace* ws);

}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CPU_CONV_H_
