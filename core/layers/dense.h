// dense: y = act(x W + b) over the last axis of its input (Keras Dense), so
// [L, H] -> [L, units] applies to every position. The kernel is [in, units]
// with Keras names, [units, in] (PyTorch's Linear) with PyTorch names; a
// dense layer may instead use an embedding's table as its weight
// (`tied_to`, BERT's output projection: y = x E^T).
#ifndef LOCKSTEP_CORE_LAYERS_DENSE_H_
#define LOCKSTEP_CORE_LAYERS_DENSE_H_

#include <string>
#include <vector>

#include "core/layers/common.h"
#include "core/layers/layer.h"

namespace lockstep {

struct DenseConfig {
  int64_t units = 0;
  Activation activation = Activation::kLinear;
  bool use_bias = true;
  Initializer kernel_initializer;  // glorot_uniform
  std::string tied_to;             // an embedding layer's name, or ""
};

class DenseLayer : public Layer {
 public:
  // `tied` (not owned) is the embedding table [units, in] when tied_to is
  // set, else null and the layer owns its kernel.
  DenseLayer(const DenseConfig& config, const std::string& name,
             const Shape& input_shape, Param* tied, ParamNaming naming,
             std::string kernel_name, std::string bias_name, uint64_t seed);

  std::vector<Param*> params() override;
  bool HasSoftmaxOutput() const override {
    return config_.activation == Activation::kSoftmax;
  }
  bool HasSigmoidOutput() const override {
    return config_.activation == Activation::kSigmoid;
  }
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;

  const DenseConfig& config() const { return config_; }
  int64_t in() const { return in_; }
  int64_t units() const { return config_.units; }
  // Rows of one GEMM for n samples (n times the positions per sample).
  int64_t Rows(int64_t n) const { return n * (input_size() / in_); }
  // The kernel is stored [units, in] (PyTorch's layout, or tied).
  bool out_in() const { return out_in_; }
  // The activation the kernels apply (softmax left out when the loss fuses
  // it); GELU is applied by the layer itself.
  ActivationKind Act(const PassContext& ctx) const;
  bool gelu() const { return config_.activation == Activation::kGelu; }

 private:
  const DenseConfig config_;
  const int64_t in_;
  const bool out_in_;
  Param* kernel_;  // own_kernel_, or the tied table
  Param own_kernel_, bias_;
  std::vector<float> pre_;  // GELU: the pre-activation of the last Forward
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LAYERS_DENSE_H_
