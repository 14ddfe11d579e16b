// Model test helpers.
#include "core/model/model_test_util.h"

#include <random>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/layers/registry.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace testing {

LayerSpec Spec(const std::string& json) {
  absl::StatusOr<LayerSpec> l = LayerFromJson(json);
  EXPECT_TRUE(l.ok()) << l.status();
  return l.ok() ? *l : LayerSpec();
}

LayerSpec Dense(int64_t units, const char* act) {
  return Spec(absl::StrFormat(
      R"({"type": "dense", "units": %d, "activation": "%s"})", units, act));
}

LayerSpec Conv(int64_t filters, int64_t k, int64_t stride, const char* pad,
               const char* act) {
  return Spec(absl::StrFormat(
      R"({"type": "conv2d", "filters": %d, "kernel_size": %d, "strides": %d,
          "padding": "%s", "activation": "%s"})",
      filters, k, stride, pad, act));
}

LayerSpec Of(const char* type) {
  return Spec(absl::StrFormat(R"({"type": "%s"})", type));
}

LayerSpec Dropout(double rate) {
  return Spec(absl::StrFormat(R"({"type": "dropout", "rate": %g})", rate));
}

ModelSpec Stack(const Shape& input, std::vector<LayerSpec> layers) {
  ModelSpec spec;
  spec.inputs = {{"input", input}};
  spec.layers = std::move(layers);
  return spec;
}

std::unique_ptr<Model> BuildOrDie(const ModelSpec& spec, uint64_t seed) {
  absl::StatusOr<std::unique_ptr<Model>> m = Model::Build(spec, seed);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

Tensor RandomInput(const Model& m, int64_t n, uint32_t seed) {
  Shape shape = m.input_shape();
  shape.insert(shape.begin(), n);
  Tensor x(shape);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  for (float& v : x.values()) v = d(gen);
  return x;
}

std::vector<int32_t> Labels(int64_t n, int classes) {
  std::vector<int32_t> l(n);
  for (int64_t i = 0; i < n; ++i)
    l[i] = static_cast<int32_t>((i * 3 + 1) % classes);
  return l;
}

ModelSpec TinyBert(int64_t layers, double dropout) {
  absl::StatusOr<ModelSpec> m = ParseModelSpec(absl::StrFormat(R"({
      "inputs": [{"name": "token_ids", "shape": [6]},
                 {"name": "segment_ids", "shape": [6]},
                 {"name": "padding_mask", "shape": [6]},
                 {"name": "mask_positions", "shape": [2]}],
      "layers": [{"type": "bert_mlm", "name": "bert",
                  "inputs": ["token_ids", "segment_ids", "padding_mask",
                             "mask_positions"],
                  "vocab_size": 11, "hidden": 8, "layers": %d, "heads": 2,
                  "intermediate": 12, "max_positions": 8, "dropout": %g}],
      "param_names": "torch"})",
                                                           layers, dropout));
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : ModelSpec();
}

}  // namespace testing
}  // namespace lockstep
