// What several layer types share: the activation and padding names of the
// job file, weight initializers, and parameter construction.
#ifndef LOCKSTEP_CORE_LAYERS_COMMON_H_
#define LOCKSTEP_CORE_LAYERS_COMMON_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "core/layers/registry.h"
#include "core/spec_reader.h"
#include "core/tensor.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/elementwise.h"

namespace lockstep {

// A dense or conv2d activation. GELU (exact, erf) needs the pre-activation
// in backward, so the layer applies it itself; the rest go through the
// kernels' ActivationKind.
enum class Activation {
  kLinear,
  kRelu,
  kGelu,
  kTanh,
  kSigmoid,
  kSoftmax,
  kRelu6
};
const spec_reader::Table<Activation>& Activations();
// kGelu maps to kLinear (the layer applies GELU separately).
ActivationKind ToActivationKind(Activation a);

enum class Padding { kValid, kSame, kExplicit };
// The names of kValid and kSame.
const spec_reader::Table<Padding>& Paddings();

// A convolution's padding: "valid", "same" (TensorFlow's: an odd total puts
// the extra row or column after), or N or [H, W]: that many zero rows and
// columns on each side (PyTorch's Conv2d(padding=N), which torchvision's
// weights were trained with).
struct ConvPadding {
  Padding mode = Padding::kValid;
  int64_t h = 0, w = 0;  // kExplicit only

  bool operator==(const ConvPadding& o) const {
    return mode == o.mode && h == o.h && w == o.w;
  }
};
// Reads the "padding" field; leaves *out alone when absent.
absl::Status ReadConvPadding(const spec_reader::Reader& r, ConvPadding* out);
spec_reader::Json ConvPaddingToJson(const ConvPadding& p);
// The geometry of n samples of input [H, W, C] through a kh x kw window
// (its taps dil_h rows and dil_w columns apart) with these strides,
// `filters` output channels and padding.
Conv2DGeometry ConvGeometry(const Shape& in, int64_t n, int64_t kh, int64_t kw,
                            int64_t filters, int64_t stride_h, int64_t stride_w,
                            const ConvPadding& padding, int64_t dil_h = 1,
                            int64_t dil_w = 1);

// How a weight is first filled. Deterministic: the same seed gives the same
// bytes on every machine (core/param_init.h).
struct Initializer {
  enum Kind { kGlorotUniform, kUniform, kTruncatedNormal, kZeros, kOnes };
  Kind kind = kGlorotUniform;
  double scale = 0;  // uniform: the limit; truncated normal: the stddev

  bool operator==(const Initializer& o) const {
    return kind == o.kind && scale == o.scale;
  }
};
// "glorot_uniform", "uniform" (limit 0.05, Keras' embedding default),
// "truncated_normal" (stddev 0.02, BERT's), or {"type": ..., "limit" |
// "stddev": x}. Leaves *out alone when the key is absent.
absl::Status ReadInitializer(const spec_reader::Reader& r, const char* key,
                             Initializer* out);
spec_reader::Json InitializerToJson(const Initializer& init);
// Fills `t` (fan_in/fan_out only matter for Glorot).
void Initialize(const Initializer& init, uint64_t seed, int64_t fan_in,
                int64_t fan_out, Tensor* t);

// A parameter named `name` of `shape`, value and gradient zero-filled.
void MakeParam(const std::string& name, const Shape& shape, Param* p);

// OK when input 0 is an image [height, width, channels]; else the error an
// image layer (conv2d, max_pool2d) gives, with a hint at the likely cause.
absl::Status CheckImageInput(const LayerBuildContext& ctx);
// A convolution window fits its input (always with "same" padding):
// "kernel_size [5, 5] is larger than its input [4, 4, 3] with padding
// \"valid\"; ..." otherwise.
absl::Status CheckKernelFits(const LayerBuildContext& ctx, int64_t kernel_h,
                             int64_t kernel_w, const ConvPadding& padding);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LAYERS_COMMON_H_
