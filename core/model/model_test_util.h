// What the Model tests share: layer specs from their job-file JSON, stacks
// of them over one input, models built from them (failing the test on an
// error), random inputs and labels, and a BERT-tiny-shaped model.
#ifndef LOCKSTEP_CORE_MODEL_MODEL_TEST_UTIL_H_
#define LOCKSTEP_CORE_MODEL_MODEL_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/job/job_spec.h"
#include "core/model/model.h"

namespace lockstep {
namespace testing {

inline const Loss& Xent() {
  return LossNamed("sparse_categorical_crossentropy");
}

// The layer `json` (a layer object) describes; fails the test and returns
// an empty LayerSpec when it does not parse.
LayerSpec Spec(const std::string& json);

// A dense layer of `units` with activation `act`.
LayerSpec Dense(int64_t units, const char* act = "linear");

// A conv2d layer of `filters` square `k` x `k` kernels.
LayerSpec Conv(int64_t filters, int64_t k, int64_t stride, const char* pad,
               const char* act);

// A layer of `type` with every field at its default.
LayerSpec Of(const char* type);

LayerSpec Dropout(double rate);

// `layers` over one input, "input", of shape `input`.
ModelSpec Stack(const Shape& input, std::vector<LayerSpec> layers);

// The model `spec` builds with `seed`; fails the test and returns null on
// an error.
std::unique_ptr<Model> BuildOrDie(const ModelSpec& spec, uint64_t seed = 1);

// `n` samples of m's input, uniform in [-1, 1).
Tensor RandomInput(const Model& m, int64_t n, uint32_t seed);

// `n` labels in [0, classes): (3i + 1) mod classes.
std::vector<int32_t> Labels(int64_t n, int classes);

// A BERT-tiny-shaped model through the whole graph: the bert_mlm block's
// layers, residual adds, the padding mask and the tied output projection.
// 6 tokens, 2 predictions, vocabulary 11, hidden 8, 2 heads, torch names.
ModelSpec TinyBert(int64_t layers, double dropout);

}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_MODEL_MODEL_TEST_UTIL_H_
