// add (the sum of inputs of one shape: residual connections, BERT's three
// embeddings) and gelu (the activation as a layer of its own).
#ifndef LOCKSTEP_CORE_LAYERS_ELEMENTWISE_LAYERS_H_
#define LOCKSTEP_CORE_LAYERS_ELEMENTWISE_LAYERS_H_

#include <string>
#include <vector>

#include "core/layers/layer.h"

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

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LAYERS_ELEMENTWISE_LAYERS_H_
