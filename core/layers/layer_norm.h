// layer_norm: normalization over the last axis with a learned scale and
// shift (Keras LayerNormalization, PyTorch nn.LayerNorm): y = (x - mean) /
// sqrt(var + epsilon) * gamma + beta, var the biased variance.
#ifndef LOCKSTEP_CORE_LAYERS_LAYER_NORM_H_
#define LOCKSTEP_CORE_LAYERS_LAYER_NORM_H_

#include <string>
#include <vector>

#include "core/layers/layer.h"

namespace lockstep {

struct LayerNormConfig {
  double epsilon = 1e-3;  // Keras' default (BERT uses 1e-12)
};

class LayerNormLayer : public Layer {
 public:
  LayerNormLayer(const LayerNormConfig& config, const std::string& name,
                 const Shape& input, std::string gamma_name,
                 std::string beta_name);

  std::vector<Param*> params() override { return {&gamma_, &beta_}; }
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;

  float epsilon() const { return epsilon_; }
  int64_t width() const { return input_shape().back(); }
  int64_t Rows(int64_t n) const { return n * input_size() / width(); }

 private:
  const float epsilon_;
  Param gamma_, beta_;
  std::vector<float> mean_, rstd_;  // per row, from the last Forward
  std::vector<float> partial_;      // per row block: dgamma, dbeta
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LAYERS_LAYER_NORM_H_
