// The parameter-free layers: max pooling, flatten, dropout.
#include "core/layers.h"
#include "kernels/cpu/dropout.h"

namespace lockstep {

MaxPool2DLayer::MaxPool2DLayer(const std::string& name,
                               const Shape& input_shape, int64_t pool_h,
                               int64_t pool_w)
    : Layer(name, input_shape,
            {(input_shape[0] - pool_h) / pool_h + 1,
             (input_shape[1] - pool_w) / pool_w + 1, input_shape[2]}),
      pool_h_(pool_h),
      pool_w_(pool_w) {}

Pool2DGeometry MaxPool2DLayer::Geometry(int64_t n) const {
  const Shape& in = input_shape();
  return Pool2DGeometry::Make(n, in[0], in[1], in[2], pool_h_, pool_w_, pool_h_,
                              pool_w_);
}

void MaxPool2DLayer::Forward(int64_t n, const float* x, float* y,
                             const PassContext&) {
  const int64_t need = n * output_size();
  if (static_cast<int64_t>(argmax_.size()) < need) argmax_.resize(need);
  MaxPool2DForward(Geometry(n), x, y, argmax_.data());
}

void MaxPool2DLayer::Backward(int64_t n, const float*, const float*, float* dy,
                              float* dx, const PassContext&) {
  if (dx != nullptr) MaxPool2DBackward(Geometry(n), dy, argmax_.data(), dx);
}

FlattenLayer::FlattenLayer(const std::string& name, const Shape& input_shape)
    : Layer(name, input_shape, {NumElements(input_shape)}) {}

DropoutLayer::DropoutLayer(const std::string& name, const Shape& input_shape,
                           double rate)
    : Layer(name, input_shape, input_shape), rate_(static_cast<float>(rate)) {}

void DropoutLayer::Forward(int64_t n, const float* x, float* y,
                           const PassContext& ctx) {
  DropoutForward(n * input_size(), rate_, ctx.dropout_seed, x, y);
}

void DropoutLayer::Backward(int64_t n, const float*, const float*, float* dy,
                            float* dx, const PassContext& ctx) {
  if (dx != nullptr) {
    DropoutBackward(n * input_size(), rate_, ctx.dropout_seed, dy, dx);
  }
}

}  // namespace lockstep
