// embedding and position_embedding: a gather forward, a scatter-add of the
// output gradient into the table backward (in a fixed order,
// kernels/cpu/embedding_grad.h, which the GPU's kernels follow).
#include "core/layers/embedding.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/layers/registry.h"
#include "kernels/cpu/embedding_grad.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

using spec_reader::Json;
using spec_reader::Reader;

absl::Status ReadEmbedding(const Reader& r, EmbeddingConfig* c) {
  RETURN_IF_ERROR(r.Require("input_dim", "an embedding layer"));
  RETURN_IF_ERROR(r.Int("input_dim", 1, &c->input_dim, 1 << 24));
  RETURN_IF_ERROR(r.Require("output_dim", "an embedding layer"));
  RETURN_IF_ERROR(r.Int("output_dim", 1, &c->output_dim));
  return ReadInitializer(r, "embeddings_initializer",
                         &c->embeddings_initializer);
}

absl::Status ReadPosition(const Reader& r, EmbeddingConfig* c) {
  RETURN_IF_ERROR(r.Require("max_length", "a position_embedding layer"));
  RETURN_IF_ERROR(r.Int("max_length", 1, &c->max_length));
  RETURN_IF_ERROR(r.Require("output_dim", "a position_embedding layer"));
  RETURN_IF_ERROR(r.Int("output_dim", 1, &c->output_dim));
  return ReadInitializer(r, "embeddings_initializer",
                         &c->embeddings_initializer);
}

Json EmbeddingToJson(const EmbeddingConfig& c) {
  Json j;
  j["input_dim"] = c.input_dim;
  j["output_dim"] = c.output_dim;
  j["embeddings_initializer"] = InitializerToJson(c.embeddings_initializer);
  return j;
}

Json PositionToJson(const EmbeddingConfig& c) {
  Json j;
  j["max_length"] = c.max_length;
  j["output_dim"] = c.output_dim;
  j["embeddings_initializer"] = InitializerToJson(c.embeddings_initializer);
  return j;
}

absl::StatusOr<std::unique_ptr<Layer>> CreateEmbedding(
    const EmbeddingConfig& c, const LayerBuildContext& ctx) {
  return std::unique_ptr<Layer>(std::make_unique<EmbeddingLayer>(
      c, false, ctx.name, ctx.inputs[0], ctx.ParamName("embeddings", "weight"),
      ctx.init_seed));
}

absl::StatusOr<std::unique_ptr<Layer>> CreatePosition(
    const EmbeddingConfig& c, const LayerBuildContext& ctx) {
  const int64_t length = ctx.inputs[0][0];
  if (length > c.max_length) {
    return ctx.Error(
        absl::StrCat("its input has ", length,
                     " positions, more than max_length ", c.max_length,
                     " (a sequence longer than the model's max_positions: "
                     "shorten data.sequence_length)"));
  }
  return std::unique_ptr<Layer>(std::make_unique<EmbeddingLayer>(
      c, true, ctx.name, ctx.inputs[0], ctx.ParamName("embeddings", "weight"),
      ctx.init_seed));
}

LOCKSTEP_REGISTER_LAYER(
    embedding, MakeLayerType<EmbeddingConfig>(
                   "embedding", "embedding",
                   {"input_dim", "output_dim", "embeddings_initializer"}, 1, 1,
                   &ReadEmbedding, &EmbeddingToJson, &CreateEmbedding));
LOCKSTEP_REGISTER_LAYER(
    position_embedding,
    MakeLayerType<EmbeddingConfig>("position_embedding", "position_embedding",
                                   {"max_length", "output_dim",
                                    "embeddings_initializer"},
                                   1, 1, &ReadPosition, &PositionToJson,
                                   &CreatePosition));

Shape OutputShape(bool positions, const Shape& input, int64_t dim) {
  if (positions) return {input[0], dim};
  Shape out = input;
  out.push_back(dim);
  return out;
}

}  // namespace

EmbeddingLayer::EmbeddingLayer(const EmbeddingConfig& config, bool positions,
                               const std::string& name, const Shape& input,
                               std::string table_name, uint64_t seed)
    : Layer(positions ? "position_embedding" : "embedding", name, {input},
            OutputShape(positions, input, config.output_dim)),
      positions_(positions),
      lookups_(positions ? input[0] : NumElements(input)) {
  const int64_t rows = positions ? config.max_length : config.input_dim;
  MakeParam(table_name, {rows, config.output_dim}, &table_);
  Initialize(config.embeddings_initializer, seed, rows, config.output_dim,
             &table_.value);
}

void EmbeddingLayer::Forward(const LayerIO& io, const PassContext&) {
  const int64_t d = dim(), v = rows(), per = lookups_;
  const float* table = io.w[0];
  if (positions_) {
    // Every sample gets rows 0..L-1.
    for (int64_t s = 0; s < io.n; ++s) {
      std::memcpy(io.y + s * per * d, table, sizeof(float) * per * d);
    }
    return;
  }
  ParallelFor(io.n * per, 256, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float f = io.x[0][i];
      const int64_t id = static_cast<int64_t>(f);
      float* out = io.y + i * d;
      // Ids come from the tokenizer, which the trainer checks against
      // input_dim; anything else reads as a zero vector, never out of the
      // table.
      if (id >= 0 && id < v && f == static_cast<float>(id)) {
        std::memcpy(out, table + id * d, sizeof(float) * d);
      } else {
        std::fill(out, out + d, 0.0f);
      }
    }
  });
}

void EmbeddingLayer::Backward(const LayerIO& io, const PassContext&) {
  const int64_t d = dim(), v = rows(), per = lookups_;
  float* grad = io.dw[0];
  if (positions_) {
    for (int64_t s = 0; s < io.n; ++s) {
      const float* dy = io.dy + s * per * d;
      for (int64_t k = 0; k < per * d; ++k) grad[k] += dy[k];
    }
  } else {
    EmbeddingGradAdd(io.n * per, v, d, io.x[0], io.dy, grad);
  }
  if (io.dx[0] != nullptr) {
    std::fill(io.dx[0], io.dx[0] + io.n * input_size(), 0.0f);
  }
}

}  // namespace lockstep
