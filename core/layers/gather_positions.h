// gather_positions: the rows of x [L, D] at the positions [P] (integer
// values) -> [P, D]: a masked language model's head runs on the masked
// positions only (keras_nlp's MaskedLMHead). Backward scatters the
// gradient back (rows gathered twice get both).
#ifndef LOCKSTEP_CORE_LAYERS_GATHER_POSITIONS_H_
#define LOCKSTEP_CORE_LAYERS_GATHER_POSITIONS_H_

#include <string>
#include <vector>

#include "core/layers/layer.h"

namespace lockstep {

class GatherPositionsLayer : public Layer {
 public:
  GatherPositionsLayer(const std::string& name, const Shape& x,
                       const Shape& positions);
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;

  int64_t length() const { return input_shape(0)[0]; }
  int64_t width() const { return input_shape(0)[1]; }
  int64_t count() const { return input_shape(1)[0]; }
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LAYERS_GATHER_POSITIONS_H_
