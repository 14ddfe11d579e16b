// add (the sum of inputs of one shape: residual connections, BERT's three
// embeddings), gelu and activation (an activation as a layer of its own,
// Keras' Activation: a ReLU after a residual add, an imported graph's).
#ifndef LOCKSTEP_CORE_LAYERS_ELEMENTWISE_LAYERS_H_
#define LOCKSTEP_CORE_LAYERS_ELEMENTWISE_LAYERS_H_

#include <string>
#include <vector>

#include "core/layers/layer.h"
#include "kernels/cpu/elementwise.h"

namespace lockstep {

class AddLayer : public Layer {
 public:
  AddLayer(const std::string& name, const std::vector<Shape>& inputs);
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;
};

class GeluLayer : public Layer {
 public:
  GeluLayer(const std::string& name, const Shape& input);
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;
};

// relu, relu6, tanh, sigmoid or softmax (over the last axis) of its input.
class ActivationLayer : public Layer {
 public:
  ActivationLayer(const std::string& name, const Shape& input,
                  ActivationKind act);
  ActivationKind act() const { return act_; }
  // The rows and columns the activation sees (softmax runs along a row).
  int64_t Rows(int64_t n) const { return n * output_size() / Cols(); }
  int64_t Cols() const {
    return output_shape().empty() ? 1 : output_shape().back();
  }
  bool HasSoftmaxOutput() const override {
    return act_ == ActivationKind::kSoftmax;
  }
  bool HasSigmoidOutput() const override {
    return act_ == ActivationKind::kSigmoid;
  }
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;

 private:
  const ActivationKind act_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LAYERS_ELEMENTWISE_LAYERS_H_
