// depthwise_conv2d: Keras DepthwiseConv2D (torch Conv2d with groups = in
// channels): a [KH, KW, C, M] kernel (with param_names "torch", PyTorch's
// [C*M, 1, KH, KW]), M = depth_multiplier filters per input channel,
// strides, TensorFlow's 'same'/'valid' padding, bias and
// activation. Direct kernels on the CPU (kernels/cpu/depthwise.h) and the
// GPU (kernels/cuda/layers/depthwise.h), the same bits on both.
#ifndef LOCKSTEP_CORE_LAYERS_DEPTHWISE_CONV2D_H_
#define LOCKSTEP_CORE_LAYERS_DEPTHWISE_CONV2D_H_

#include <string>
#include <vector>

#include "core/layers/common.h"
#include "core/layers/conv_kernel_layout.h"
#include "core/layers/layer.h"
#include "kernels/cpu/conv.h"

namespace lockstep {

struct DepthwiseConv2DConfig {
  int64_t kernel_h = 0, kernel_w = 0;
  int64_t stride_h = 1, stride_w = 1;
  int64_t depth_multiplier = 1;
  ConvPadding padding;
  Activation activation = Activation::kLinear;
  bool use_bias = true;
};

class DepthwiseConv2DLayer : public Layer {
 public:
  DepthwiseConv2DLayer(const DepthwiseConv2DConfig& config,
                       const std::string& name, const Shape& input_shape,
                       std::string kernel_name, std::string bias_name,
                       uint64_t seed, bool torch_layout);

  std::vector<Param*> params() override;
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;

  const DepthwiseConv2DConfig& config() const { return config_; }
  ActivationKind Act() const { return ToActivationKind(config_.activation); }
  // filters = in channels x depth_multiplier.
  Conv2DGeometry Geometry(int64_t n) const;
  // The kernel parameter's layout (PyTorch's [C*M, 1, KH, KW] or Keras').
  const ConvKernelLayout& kernel_layout() const { return layout_; }
  int64_t kernel_floats() const { return kernel_.value.size(); }

 private:
  const DepthwiseConv2DConfig config_;
  ConvKernelLayout layout_;
  Param kernel_, bias_;
  std::vector<float> partials_;  // the kernel gradient's row blocks
  // `x` (n floats) rounded to bfloat16 into `copy` when the pass is bf16
  // (PassContext::precision), else `x` itself.
  const float* Rounded(const PassContext& ctx, const float* x, int64_t n,
                       std::vector<float>& copy) const;
  std::vector<float> rounded_x_, rounded_kernel_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LAYERS_DEPTHWISE_CONV2D_H_
