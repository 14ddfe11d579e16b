// embedding: integer ids (as exact float values) [L] -> rows of a table
// [input_dim, output_dim], [L, output_dim] (Keras Embedding, PyTorch
// nn.Embedding). position_embedding: rows 0..L-1 of a table [max_length,
// output_dim] whatever the input's values, [L, output_dim] (BERT's learned
// positions, keras_nlp's PositionEmbedding). An embedding's table may also
// be a dense layer's weight (tied_to).
#ifndef LOCKSTEP_CORE_LAYERS_EMBEDDING_H_
#define LOCKSTEP_CORE_LAYERS_EMBEDDING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/layers/common.h"
#include "core/layers/layer.h"

namespace lockstep {

struct EmbeddingConfig {
  int64_t input_dim = 0;   // embedding: ids in [0, input_dim)
  int64_t max_length = 0;  // position_embedding: table rows
  int64_t output_dim = 0;
  // Keras' default for embeddings: uniform in [-0.05, 0.05].
  Initializer embeddings_initializer{Initializer::kUniform, 0.05};
};

class EmbeddingLayer : public Layer {
 public:
  // `positions`: a position_embedding (rows by position, not by id).
  EmbeddingLayer(const EmbeddingConfig& config, bool positions,
                 const std::string& name, const Shape& input,
                 std::string table_name, uint64_t seed);

  std::vector<Param*> params() override { return {&table_}; }
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  // The table's gradient accumulates (it may be a tied weight); an input
  // gradient, if asked for, is zero (ids are not differentiable).
  void Backward(const LayerIO& io, const PassContext& ctx) override;

  bool positions() const { return positions_; }
  int64_t rows() const { return table_.value.dim(0); }
  int64_t dim() const { return table_.value.dim(1); }
  // Rows looked up per sample (the input's first axis, or all its values).
  int64_t lookups() const { return lookups_; }

 private:
  const bool positions_;
  const int64_t lookups_;
  Param table_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LAYERS_EMBEDDING_H_
