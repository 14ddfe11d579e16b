// The parameter-free stack layers: max and average pooling, global average
// pooling, flatten, dropout.
#ifndef LOCKSTEP_CORE_LAYERS_SIMPLE_LAYERS_H_
#define LOCKSTEP_CORE_LAYERS_SIMPLE_LAYERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/layers/common.h"
#include "core/layers/layer.h"
#include "kernels/cpu/pool.h"

namespace lockstep {

struct Pool2DConfig {
  int64_t pool_h = 2, pool_w = 2;
  int64_t stride_h = 2, stride_w = 2;  // default: the pool size (Keras)
  // "valid", or N / [H, W] cells on each side (PyTorch's padding=N): cells
  // that never win a max; zeros in an average (counted in its divisor
  // when count_include_pad); "same" is refused.
  ConvPadding padding;
  bool count_include_pad = true;  // average_pooling2d only (PyTorch's)
};

// Max pooling over [H, W, C].
class MaxPool2DLayer : public Layer {
 public:
  MaxPool2DLayer(const Pool2DConfig& config, const std::string& name,
                 const Shape& input_shape);
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;
  Pool2DGeometry Geometry(int64_t n) const;

 private:
  const Pool2DConfig config_;
  std::vector<int32_t> argmax_;
};

// Average pooling over [H, W, C] (Keras AveragePooling2D, PyTorch
// AvgPool2d).
class AvgPool2DLayer : public Layer {
 public:
  AvgPool2DLayer(const Pool2DConfig& config, const std::string& name,
                 const Shape& input_shape);
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;
  Pool2DGeometry Geometry(int64_t n) const;
  bool count_include_pad() const { return config_.count_include_pad; }

 private:
  const Pool2DConfig config_;
};

// The mean of each channel over H and W: [H, W, C] -> [C] (Keras
// GlobalAveragePooling2D; [1, 1, C] with keepdims, as torch's
// AdaptiveAvgPool2d(1) in NHWC).
class GlobalAvgPool2DLayer : public Layer {
 public:
  GlobalAvgPool2DLayer(const std::string& name, const Shape& input_shape,
                       bool keepdims);
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;
  int64_t positions() const { return input_shape()[0] * input_shape()[1]; }
  int64_t channels() const { return input_shape()[2]; }
};

// A reshape to [prod(input_shape)]: no copy. Under param_names "torch" a
// feature map [H, W, C] (C and H*W both > 1) is flattened in PyTorch's
// order, channel by channel (nn.Flatten of an NCHW tensor), so the dense
// layer after it holds the weights a torch module holds and a checkpoint
// loads into the torch model users write; then it is a transpose.
class FlattenLayer : public Layer {
 public:
  FlattenLayer(const std::string& name, const Shape& input_shape,
               bool channels_first);
  bool PassesThrough(const PassContext&) const override {
    return !channels_first_;
  }
  void Forward(const LayerIO& io, const PassContext&) override;
  void Backward(const LayerIO& io, const PassContext&) override;
  bool channels_first() const { return channels_first_; }
  int64_t positions() const { return input_shape()[0] * input_shape()[1]; }
  int64_t channels() const { return input_shape()[2]; }

 private:
  const bool channels_first_;
};

// Inverted dropout in training (the mask a pure function of the pass's
// seed); the identity otherwise.
class DropoutLayer : public Layer {
 public:
  DropoutLayer(const std::string& name, const Shape& input_shape, double rate);
  bool PassesThrough(const PassContext& ctx) const override {
    return !ctx.training || rate_ <= 0.0f;
  }
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;
  float rate() const { return rate_; }

 private:
  const float rate_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LAYERS_SIMPLE_LAYERS_H_
