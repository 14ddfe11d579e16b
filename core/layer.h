// The layer interface the model runs over a batch: raw float buffers of n
// samples, each of the layer's per-sample input/output shape. The model owns
// every buffer; a layer owns only its parameters and scratch.
#ifndef LOCKSTEP_CORE_LAYER_H_
#define LOCKSTEP_CORE_LAYER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/job_spec.h"
#include "core/tensor.h"

namespace lockstep {

struct PassContext {
  bool training = false;
  uint64_t dropout_seed = 0;  // this layer's; only dropout reads it
  // Leave a softmax activation out (forward and backward): the loss applies
  // it fused with cross-entropy, from the logits.
  bool skip_softmax = false;
};

class Layer {
 public:
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  const Shape& input_shape() const { return input_shape_; }    // per sample
  const Shape& output_shape() const { return output_shape_; }  // per sample
  int64_t input_size() const { return input_size_; }
  int64_t output_size() const { return output_size_; }

  // Trainable parameters, kernel before bias. Owned by the layer; pointers
  // stay valid for its life.
  virtual std::vector<Param*> params() { return {}; }
  // True when the output is the input buffer itself (flatten; dropout outside
  // training): the model then calls neither Forward nor Backward.
  virtual bool PassesThrough(const PassContext& ctx) const { return false; }
  // y [n, output_size] = layer(x [n, input_size]). Not thread-safe: a layer
  // keeps scratch for its Backward.
  virtual void Forward(int64_t n, const float* x, float* y,
                       const PassContext& ctx) = 0;
  // x and y are those of the last Forward (same ctx). dy [n, output_size]
  // holds d(loss)/dy and may be clobbered. Overwrites every param grad;
  // writes dx [n, input_size] when dx is not null.
  virtual void Backward(int64_t n, const float* x, const float* y, float* dy,
                        float* dx, const PassContext& ctx) = 0;

 protected:
  Layer(std::string name, Shape input_shape, Shape output_shape)
      : name_(std::move(name)),
        input_shape_(std::move(input_shape)),
        output_shape_(std::move(output_shape)),
        input_size_(NumElements(input_shape_)),
        output_size_(NumElements(output_shape_)) {}

 private:
  std::string name_;
  Shape input_shape_, output_shape_;
  int64_t input_size_, output_size_;
};

// Keras' default name stem for a layer type ("dense", "conv2d",
// "max_pooling2d", "flatten", "dropout").
const char* DefaultLayerStem(LayerType type);

// Validates `spec` against its per-sample input shape and builds the layer,
// parameters initialised from init_seed (Glorot-uniform kernels, zero biases).
// Errors are kInvalidArgument and start "model.layers[index] (name): ".
absl::StatusOr<std::unique_ptr<Layer>> CreateLayer(const LayerSpec& spec,
                                                   int index,
                                                   const std::string& name,
                                                   const Shape& input_shape,
                                                   uint64_t init_seed);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LAYER_H_
