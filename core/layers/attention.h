// multi_head_attention: self-attention over a sequence x [L, width] with an
// optional padding mask [L] (1 = a token, 0 = padding a query must not
// attend to): per head, softmax(Q K^T / sqrt(key_dim)) V with dropout on the
// probabilities, the heads concatenated and projected back to the width
// (Keras MultiHeadAttention; Hugging Face BERT's self-attention and its
// output projection, whose state-dict names it takes with PyTorch names:
// <name>.self.query.weight ... <name>.output.dense.bias).
#ifndef LOCKSTEP_CORE_LAYERS_ATTENTION_H_
#define LOCKSTEP_CORE_LAYERS_ATTENTION_H_

#include <string>
#include <vector>

#include "core/layers/common.h"
#include "core/layers/layer.h"

namespace lockstep {

struct AttentionConfig {
  int64_t num_heads = 0;
  int64_t key_dim = 0;  // per head; 0: width / num_heads
  double dropout = 0;   // on the attention probabilities
  bool use_bias = true;
  Initializer kernel_initializer;  // glorot_uniform
};

class MultiHeadAttentionLayer : public Layer {
 public:
  MultiHeadAttentionLayer(const AttentionConfig& config,
                          const std::string& name,
                          const std::vector<Shape>& inputs, ParamNaming naming,
                          uint64_t seed);

  // query, key, value, output: weight then bias each (no biases without
  // use_bias). Weights are [width, inner] ([inner, width] for the output)
  // with Keras names, transposed with PyTorch's.
  std::vector<Param*> params() override;
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;

  int64_t length() const { return input_shape(0)[0]; }
  int64_t width() const { return input_shape(0)[1]; }
  int64_t heads() const { return config_.num_heads; }
  int64_t key_dim() const { return key_dim_; }
  int64_t inner() const { return heads() * key_dim_; }
  bool masked() const { return num_inputs() == 2; }
  bool out_in() const { return out_in_; }
  float rate() const { return static_cast<float>(config_.dropout); }
  bool use_bias() const { return config_.use_bias; }
  float scale() const;

 private:
  // y [rows, out] = x [rows, in] W + b, W stored per layout.
  void Project(GemmPrecision precision, int64_t rows, int64_t in, int64_t out,
               const float* x, const float* w, const float* b, float* y) const;

  const AttentionConfig config_;
  const int64_t key_dim_;
  const bool out_in_;
  Param wq_, bq_, wk_, bk_, wv_, bv_, wo_, bo_;
  // The last Forward's projections, probabilities (before dropout) and
  // heads' outputs; Backward's gradients of them.
  std::vector<float> q_, k_, v_, probs_, context_;
  std::vector<float> dq_, dk_, dv_, dcontext_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LAYERS_ATTENTION_H_
