// The transformer_encoder and bert_mlm blocks: their fields and their
// expansion into layers (names per the model's naming: keras_nlp's sublayer
// names, or Hugging Face BERT's module paths).
#include "core/layers/transformer.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "core/json_util.h"
#include "core/layers/registry.h"

namespace lockstep {
namespace {

using spec_reader::Json;
using spec_reader::Reader;

Json TruncatedNormal(double stddev) {
  return Json{{"type", "truncated_normal"}, {"stddev", stddev}};
}

// One encoder layer named `name` over `x` (and the padding mask), in the
// naming of `ctx`.
std::vector<LayerSpec> EncoderLayers(const TransformerEncoderConfig& c,
                                     const std::string& name,
                                     const std::string& x,
                                     const std::string& mask, int64_t width,
                                     ParamNaming naming) {
  const bool torch = naming == ParamNaming::kTorch;
  auto sub = [&](const char* keras, const char* hf) {
    return torch ? absl::StrCat(name, ".", hf) : absl::StrCat(name, "/", keras);
  };
  const Json init = TruncatedNormal(c.initializer_stddev);
  const std::string attn = sub("self_attention", "attention");
  const std::string attn_drop =
      sub("self_attention_dropout", "attention.output.dropout");
  const std::string attn_add =
      sub("self_attention_add", "attention.output.add");
  const std::string attn_norm =
      sub("self_attention_layer_norm", "attention.output.LayerNorm");
  const std::string ff_in =
      sub("feedforward_intermediate_dense", "intermediate.dense");
  const std::string ff_out = sub("feedforward_output_dense", "output.dense");
  const std::string ff_drop = sub("feedforward_dropout", "output.dropout");
  const std::string ff_add = sub("feedforward_add", "output.add");
  const std::string ff_norm = sub("feedforward_layer_norm", "output.LayerNorm");
  std::vector<std::string> attn_inputs = {x};
  if (!mask.empty()) attn_inputs.push_back(mask);
  const Json eps = {{"epsilon", c.layer_norm_epsilon}};
  return {
      SubLayer("multi_head_attention", attn, attn_inputs,
           {{"num_heads", c.num_heads},
            {"dropout", c.dropout},
            {"use_bias", true},
            {"kernel_initializer", init}}),
      SubLayer("dropout", attn_drop, {attn}, {{"rate", c.dropout}}),
      SubLayer("add", attn_add, {attn_drop, x}, Json::object()),
      SubLayer("layer_norm", attn_norm, {attn_add}, eps),
      SubLayer("dense", ff_in, {attn_norm},
           {{"units", c.intermediate_dim},
            {"activation", "gelu"},
            {"use_bias", true},
            {"kernel_initializer", init}}),
      SubLayer("dense", ff_out, {ff_in},
           {{"units", width},
            {"activation", "linear"},
            {"use_bias", true},
            {"kernel_initializer", init}}),
      SubLayer("dropout", ff_drop, {ff_out}, {{"rate", c.dropout}}),
      SubLayer("add", ff_add, {ff_drop, attn_norm}, Json::object()),
      SubLayer("layer_norm", ff_norm, {ff_add}, eps),
  };
}

// --- transformer_encoder -------------------------------------------------

absl::Status ReadEncoder(const Reader& r, TransformerEncoderConfig* c) {
  RETURN_IF_ERROR(r.Require("num_heads", "a transformer_encoder"));
  RETURN_IF_ERROR(r.Int("num_heads", 1, &c->num_heads));
  RETURN_IF_ERROR(r.Require("intermediate_dim", "a transformer_encoder"));
  RETURN_IF_ERROR(r.Int("intermediate_dim", 1, &c->intermediate_dim));
  RETURN_IF_ERROR(r.Number("dropout", spec_reader::kUnitOpen, &c->dropout));
  RETURN_IF_ERROR(r.Number("layer_norm_epsilon", spec_reader::kPositive,
                           &c->layer_norm_epsilon));
  return r.Number("initializer_stddev", spec_reader::kPositive,
                  &c->initializer_stddev);
}

Json EncoderToJson(const TransformerEncoderConfig& c) {
  Json j;
  j["num_heads"] = c.num_heads;
  j["intermediate_dim"] = c.intermediate_dim;
  j["dropout"] = c.dropout;
  j["layer_norm_epsilon"] = c.layer_norm_epsilon;
  j["initializer_stddev"] = c.initializer_stddev;
  return j;
}

absl::StatusOr<std::vector<LayerSpec>> ExpandEncoder(
    const TransformerEncoderConfig& c, const BlockContext& ctx) {
  const Shape& x = ctx.input_shapes[0];
  if (x.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.where, ": expects a sequence [length, width], got ",
                     ShapeToString(x)));
  }
  return EncoderLayers(c, ctx.name, ctx.inputs[0],
                       ctx.inputs.size() > 1 ? ctx.inputs[1] : "", x[1],
                       ctx.naming);
}

LOCKSTEP_REGISTER_LAYER(transformer_encoder,
                        MakeBlockType<TransformerEncoderConfig>(
                            "transformer_encoder", "transformer_encoder",
                            {"num_heads", "intermediate_dim", "dropout",
                             "layer_norm_epsilon", "initializer_stddev"},
                            1, 2, &ReadEncoder, &EncoderToJson,
                            &ExpandEncoder));

// --- bert_mlm ------------------------------------------------------------

absl::Status ReadBert(const Reader& r, BertMlmConfig* c) {
  RETURN_IF_ERROR(r.Require("vocab_size", "a bert_mlm model"));
  RETURN_IF_ERROR(r.Int("vocab_size", 8, &c->vocab_size, 1 << 24));
  RETURN_IF_ERROR(r.Int("hidden", 1, &c->hidden));
  RETURN_IF_ERROR(r.Int("layers", 1, &c->layers, 64));
  RETURN_IF_ERROR(r.Int("heads", 1, &c->heads));
  RETURN_IF_ERROR(r.Int("intermediate", 1, &c->intermediate));
  RETURN_IF_ERROR(r.Int("max_positions", 1, &c->max_positions));
  RETURN_IF_ERROR(r.Int("type_vocab_size", 1, &c->type_vocab_size));
  RETURN_IF_ERROR(r.Number("dropout", spec_reader::kUnitOpen, &c->dropout));
  RETURN_IF_ERROR(r.Number("layer_norm_epsilon", spec_reader::kPositive,
                           &c->layer_norm_epsilon));
  RETURN_IF_ERROR(r.Number("initializer_stddev", spec_reader::kPositive,
                           &c->initializer_stddev));
  if (c->hidden % c->heads != 0) {
    return spec_reader::Bad(
        r.At("heads"),
        absl::StrCat("must divide hidden (", c->hidden, "), got ", c->heads));
  }
  return absl::OkStatus();
}

Json BertToJson(const BertMlmConfig& c) {
  Json j;
  j["vocab_size"] = c.vocab_size;
  j["hidden"] = c.hidden;
  j["layers"] = c.layers;
  j["heads"] = c.heads;
  j["intermediate"] = c.intermediate;
  j["max_positions"] = c.max_positions;
  j["type_vocab_size"] = c.type_vocab_size;
  j["dropout"] = c.dropout;
  j["layer_norm_epsilon"] = c.layer_norm_epsilon;
  j["initializer_stddev"] = c.initializer_stddev;
  return j;
}

// Inputs: token_ids, segment_ids, padding_mask, mask_positions.
absl::StatusOr<std::vector<LayerSpec>> ExpandBert(const BertMlmConfig& c,
                                                  const BlockContext& ctx) {
  if (ctx.inputs.size() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.where,
                     ": bert_mlm takes token_ids, segment_ids, padding_mask "
                     "and mask_positions; got ",
                     ctx.inputs.size(), " inputs"));
  }
  const bool torch = ctx.naming == ParamNaming::kTorch;
  // Hugging Face's module paths, or keras_nlp-like names under the block's.
  auto name = [&](const std::string& keras, const std::string& hf) {
    return torch ? hf : absl::StrCat(ctx.name, "/", keras);
  };
  const std::string &ids = ctx.inputs[0], &segments = ctx.inputs[1],
                    &mask = ctx.inputs[2], &positions = ctx.inputs[3];
  const Json init = TruncatedNormal(c.initializer_stddev);
  const Json eps = {{"epsilon", c.layer_norm_epsilon}};
  const std::string word =
      name("token_embedding", "bert.embeddings.word_embeddings");
  const std::string pos =
      name("position_embedding", "bert.embeddings.position_embeddings");
  const std::string seg =
      name("segment_embedding", "bert.embeddings.token_type_embeddings");
  const std::string emb_add = name("embeddings_add", "bert.embeddings.add");
  const std::string emb_norm =
      name("embeddings_layer_norm", "bert.embeddings.LayerNorm");
  const std::string emb_drop =
      name("embeddings_dropout", "bert.embeddings.dropout");
  std::vector<LayerSpec> out = {
      SubLayer("embedding", word, {ids},
           {{"input_dim", c.vocab_size},
            {"output_dim", c.hidden},
            {"embeddings_initializer", init}}),
      SubLayer("position_embedding", pos, {ids},
           {{"max_length", c.max_positions},
            {"output_dim", c.hidden},
            {"embeddings_initializer", init}}),
      SubLayer("embedding", seg, {segments},
           {{"input_dim", c.type_vocab_size},
            {"output_dim", c.hidden},
            {"embeddings_initializer", init}}),
      SubLayer("add", emb_add, {word, pos, seg}, Json::object()),
      SubLayer("layer_norm", emb_norm, {emb_add}, eps),
      SubLayer("dropout", emb_drop, {emb_norm}, {{"rate", c.dropout}}),
  };
  TransformerEncoderConfig enc;
  enc.num_heads = c.heads;
  enc.intermediate_dim = c.intermediate;
  enc.dropout = c.dropout;
  enc.layer_norm_epsilon = c.layer_norm_epsilon;
  enc.initializer_stddev = c.initializer_stddev;
  std::string x = emb_drop;
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string layer =
        torch ? absl::StrCat("bert.encoder.layer.", i)
              : absl::StrCat(ctx.name, "/transformer_layer_", i);
    for (LayerSpec& l :
         EncoderLayers(enc, layer, x, mask, c.hidden, ctx.naming)) {
      out.push_back(std::move(l));
    }
    x = out.back().name;
  }
  const std::string gather = name("mlm_gather", "cls.predictions.gather");
  const std::string dense =
      name("mlm_dense", "cls.predictions.transform.dense");
  const std::string norm =
      name("mlm_layer_norm", "cls.predictions.transform.LayerNorm");
  // Named so that its bias is cls.predictions.bias; its weight is the
  // token embedding's table.
  const std::string logits = name("mlm_output", "cls.predictions");
  out.push_back(
      SubLayer("gather_positions", gather, {x, positions}, Json::object()));
  out.push_back(SubLayer("dense", dense, {gather},
                     {{"units", c.hidden},
                      {"activation", "gelu"},
                      {"use_bias", true},
                      {"kernel_initializer", init}}));
  out.push_back(SubLayer("layer_norm", norm, {dense}, eps));
  out.push_back(SubLayer("dense", logits, {norm},
                     {{"units", c.vocab_size},
                      {"activation", "linear"},
                      {"use_bias", true},
                      {"tied_to", word}}));
  return out;
}

LayerTypeInfo BertType() {
  LayerTypeInfo info = MakeBlockType<BertMlmConfig>(
      "bert_mlm", "bert_mlm",
      {"vocab_size", "hidden", "layers", "heads", "intermediate",
       "max_positions", "type_vocab_size", "dropout", "layer_norm_epsilon",
       "initializer_stddev"},
      4, 4, &ReadBert, &BertToJson, &ExpandBert);
  info.preset_inputs = {"token_ids", "segment_ids", "padding_mask",
                        "mask_positions"};
  return info;
}

LOCKSTEP_REGISTER_LAYER(bert_mlm, BertType());

}  // namespace
}  // namespace lockstep
