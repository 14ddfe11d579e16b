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
  // Keras' and PyTorch's groups: the channels and filters split into this
  // many groups, group g's filters seeing only its channels; the kernel is
  // [KH, KW, C / groups, F] (torch [F, C / groups, KH, KW]).
  int64_t groups = 1;
  // Keras' dilation_rate, PyTorch's dilation: rows and columns between
  // the kernel's taps (CPU only for now).
  int64_t dil_h = 1, dil_w = 1;
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
  // One group's: in_c and filters divided by groups.
  Conv2DGeometry GroupGeometry(int64_t n) const;
  // The kernel parameter's layout (PyTorch's [F, C, KH, KW] or Keras').
  const ConvKernelLayout& kernel_layout() const { return layout_; }

 private:
  const Conv2DConfig config_;
  ConvKernelLayout layout_;
  Param kernel_, bias_;
  ConvWorkspace ws_;
  // groups > 1: one workspace per group (each keeps its patches from the
  // forward to the backward) and a group's gathered channels.
  std::vector<ConvWorkspace> group_ws_;
  std::vector<float> x_g_, k_g_, y_g_, dy_g_, dk_g_, dx_g_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LAYERS_CONV2D_H_
