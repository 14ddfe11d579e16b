// Blocks built from the layers: transformer_encoder (BERT's post-LN layer:
// self-attention with the padding mask, dropout, residual, LayerNorm; a GELU
// feed-forward, dropout, residual, LayerNorm) and bert_mlm (BERT's token +
// position + segment embeddings, embedding LayerNorm and dropout, the
// encoder layers, and the masked-LM head on the masked positions: dense +
// GELU, LayerNorm, and the output projection tied to the token embedding).
// With PyTorch names a bert_mlm's parameters are Hugging Face
// BertForMaskedLM's: bert.embeddings.word_embeddings.weight,
// bert.encoder.layer.0.attention.self.query.weight, ..., cls.predictions.bias,
// so its model.safetensors loads as the initial weights and lockstep's
// checkpoints load back into transformers.
#ifndef LOCKSTEP_CORE_LAYERS_TRANSFORMER_H_
#define LOCKSTEP_CORE_LAYERS_TRANSFORMER_H_

#include <cstdint>

namespace lockstep {

struct TransformerEncoderConfig {
  int64_t num_heads = 0;
  int64_t intermediate_dim = 0;
  double dropout = 0.1;
  double layer_norm_epsilon = 1e-12;  // BERT's
  double initializer_stddev = 0.02;   // truncated normal, as BERT
};

struct BertMlmConfig {
  int64_t vocab_size = 0;
  int64_t hidden = 128;
  int64_t layers = 2;
  int64_t heads = 2;
  int64_t intermediate = 512;
  int64_t max_positions = 512;
  int64_t type_vocab_size = 2;
  double dropout = 0.1;
  double layer_norm_epsilon = 1e-12;
  double initializer_stddev = 0.02;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LAYERS_TRANSFORMER_H_
