#include "core/layers/conv_kernel_layout.h"

#include <algorithm>
#include <utility>

#include "kernels/cpu/conv.h"

namespace lockstep {

ConvKernelLayout::ConvKernelLayout(bool torch, Shape keras_shape,
                                   int64_t filters, int64_t channels)
    : torch_(torch),
      keras_shape_(std::move(keras_shape)),
      filters_(filters),
      channels_(channels) {}

Shape ConvKernelLayout::param_shape() const {
  if (!torch_) return keras_shape_;
  return {filters_, channels_, keras_shape_[0], keras_shape_[1]};
}

void ConvKernelLayout::FromKeras(const float* keras, float* param) const {
  if (!torch_) {
    std::copy(keras, keras + floats(), param);
    return;
  }
  KerasToTorchConvKernel(filters_, channels_, keras_shape_[0], keras_shape_[1],
                         keras, param);
}

const float* ConvKernelLayout::KerasKernel(const float* kernel) {
  if (!torch_) return kernel;
  kernel_.resize(floats());
  TorchToKerasConvKernel(filters_, channels_, keras_shape_[0], keras_shape_[1],
                         kernel, kernel_.data());
  return kernel_.data();
}

float* ConvKernelLayout::KerasGrad(float* dw) {
  if (!torch_) return dw;
  grad_.resize(floats());
  return grad_.data();
}

void ConvKernelLayout::FinishGrad(float* dw) const {
  if (!torch_) return;
  KerasToTorchConvKernel(filters_, channels_, keras_shape_[0], keras_shape_[1],
                         grad_.data(), dw);
}

}  // namespace lockstep
