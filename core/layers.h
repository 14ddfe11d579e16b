// The concrete layers (dense, conv2d, max_pool2d, flatten, dropout). Build
// them through CreateLayer (core/layer.h), which validates the spec first.
#ifndef LOCKSTEP_CORE_LAYERS_H_
#define LOCKSTEP_CORE_LAYERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/layer.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/pool.h"

namespace lockstep {

ActivationKind ToActivationKind(Activation a);

// y = act(x W + b); W [in, units].
class DenseLayer : public Layer {
 public:
  DenseLayer(const std::string& name, int64_t in, int64_t units, Activation act,
             bool use_bias, uint64_t init_seed);
  std::vector<Param*> params() override;
  void Forward(int64_t n, const float* x, float* y,
               const PassContext& ctx) override;
  void Backward(int64_t n, const float* x, const float* y, float* dy, float* dx,
                const PassContext& ctx) override;

 private:
  ActivationKind Act(const PassContext& ctx) const;
  const int64_t in_, units_;
  const Activation act_;
  const bool use_bias_;
  Param kernel_, bias_;
};

// NHWC conv with a [KH, KW, C, F] kernel; Keras 'same'/'valid' padding.
class Conv2DLayer : public Layer {
 public:
  // input_shape [H, W, C]; the spec is already validated.
  Conv2DLayer(const std::string& name, const Shape& input_shape,
              const LayerSpec& spec, uint64_t init_seed);
  std::vector<Param*> params() override;
  void Forward(int64_t n, const float* x, float* y,
               const PassContext& ctx) override;
  void Backward(int64_t n, const float* x, const float* y, float* dy, float* dx,
                const PassContext& ctx) override;

 private:
  ActivationKind Act(const PassContext& ctx) const;
  Conv2DGeometry Geometry(int64_t n) const;
  const LayerSpec spec_;
  Param kernel_, bias_;
  ConvWorkspace ws_;
};

// Valid max pooling, strides = pool size (Keras' default).
class MaxPool2DLayer : public Layer {
 public:
  MaxPool2DLayer(const std::string& name, const Shape& input_shape,
                 int64_t pool_h, int64_t pool_w);
  void Forward(int64_t n, const float* x, float* y,
               const PassContext& ctx) override;
  void Backward(int64_t n, const float* x, const float* y, float* dy, float* dx,
                const PassContext& ctx) override;

 private:
  Pool2DGeometry Geometry(int64_t n) const;
  const int64_t pool_h_, pool_w_;
  std::vector<int32_t> argmax_;
};

// A reshape to [prod(input_shape)]: no copy.
class FlattenLayer : public Layer {
 public:
  FlattenLayer(const std::string& name, const Shape& input_shape);
  bool PassesThrough(const PassContext&) const override { return true; }
  void Forward(int64_t, const float*, float*, const PassContext&) override {}
  void Backward(int64_t, const float*, const float*, float*, float*,
                const PassContext&) override {}
};

// Inverted dropout in training; the identity otherwise.
class DropoutLayer : public Layer {
 public:
  DropoutLayer(const std::string& name, const Shape& input_shape, double rate);
  bool PassesThrough(const PassContext& ctx) const override {
    return !ctx.training || rate_ <= 0.0f;
  }
  void Forward(int64_t n, const float* x, float* y,
               const PassContext& ctx) override;
  void Backward(int64_t n, const float* x, const float* y, float* dy, float* dx,
                const PassContext& ctx) override;

 private:
  const float rate_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LAYERS_H_
