// conv2d: NHWC convolution with a [KH, KW, C, F] kernel (Keras' layout; with
// param_names "torch", PyTorch's [F, C, KH, KW], converted around the same
// kernels), strides, and TensorFlow's 'same'/'valid' padding, over im2col +
// GEMM on the CPU and cuDNN on a GPU.
#ifndef LOCKSTEP_CORE_LAYERS_CONV2D_H_
#define LOCKSTEP_CORE_LAYERS_CONV2D_H_

#include <string>
#include <vector>

#include "core/layers/common.h"
#include "core/layers/conv_kernel_layout.h"
#include "core/layers/layer.h"
#include "kernels/cpu/conv.h"

namespace lockstep {

struct Conv2DConfig {
  int64_t filters = 0;
  int64_t kernel_h = 0, kernel_w = 0;
  int64_t stride_h = 1, stride_w = 1;
  ConvPadding padding;
  Activation activation = Activation::kLinear;
  bool use_bias = true;
};

class Conv2DLayer : public Layer {
 public:
  // input_shape [H, W, C], checked by the registry's create.
  Conv2DLayer(const Conv2DConfig& config, const std::string& name,
              const Shape& input_shape, std::string kernel_name,
              std::string bias_name, uint64_t seed, bool torch_layout);

  std::vector<Param*> params() override;
  bool HasSoftmaxOutput() const override {
    return config_.activation == Activation::kSoftmax;
  }
  bool HasSigmoidOutput() const override {
    return config_.activation == Activation::kSigmoid;
  }
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;

  const Conv2DConfig& config() const { return config_; }
  ActivationKind Act(const PassContext& ctx) const;
  Conv2DGeometry Geometry(int64_t n) const;
  // The kernel parameter's layout (PyTorch's [F, C, KH, KW] or Keras').
  const ConvKernelLayout& kernel_layout() const { return layout_; }

 private:
  const Conv2DConfig config_;
  ConvKernelLayout layout_;
  Param kernel_, bias_;
  ConvWorkspace ws_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LAYERS_CONV2D_H_
