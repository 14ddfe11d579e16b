// A convolution kernel parameter in Keras' layout [KH, KW, C, F] or, with
// param_names "torch", PyTorch's [F, C, KH, KW] (a depthwise kernel: Keras
// [KH, KW, C, M], torch [C*M, 1, KH, KW]). The compute kernels always read
// Keras' layout: a torch-layout parameter is converted on the way in and
// its gradient on the way out (on a GPU by conv_kernel_layout_cuda.h).
#ifndef LOCKSTEP_CORE_LAYERS_CONV_KERNEL_LAYOUT_H_
#define LOCKSTEP_CORE_LAYERS_CONV_KERNEL_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace lockstep {

class ConvKernelLayout {
 public:
  // `keras_shape` [KH, KW, ...]; in torch's terms `filters` outputs of
  // `channels` inputs each (depthwise: C*M and 1).
  ConvKernelLayout(bool torch, Shape keras_shape, int64_t filters,
                   int64_t channels);

  bool torch() const { return torch_; }
  int64_t floats() const { return NumElements(keras_shape_); }
  int64_t filters() const { return filters_; }
  int64_t channels() const { return channels_; }
  int64_t taps() const { return keras_shape_[0] * keras_shape_[1]; }
  // The parameter's shape.
  Shape param_shape() const;
  // Writes `keras` (Keras' layout) into the parameter's layout.
  void FromKeras(const float* keras, float* param) const;

  // CPU, not thread-safe (the layer's scratch): `kernel` in Keras' layout,
  // itself or a converted copy.
  const float* KerasKernel(const float* kernel);
  // Where to write the gradient in Keras' layout (`dw` itself, or scratch),
  // then FinishGrad moves it into `dw` in the parameter's layout.
  float* KerasGrad(float* dw);
  void FinishGrad(float* dw) const;

 private:
  const bool torch_;
  const Shape keras_shape_;
  const int64_t filters_, channels_;
  std::vector<float> kernel_, grad_;  // torch layout only
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LAYERS_CONV_KERNEL_LAYOUT_H_
