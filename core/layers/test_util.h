// Test helpers for layers: a layer built from its job-file JSON through the
// registry, and gradient checks of its Backward against central finite
// differences of L = sum(w * layer(x)) for a fixed random w.
#ifndef LOCKSTEP_CORE_LAYERS_TEST_UTIL_H_
#define LOCKSTEP_CORE_LAYERS_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/layers/layer.h"
#include "core/layers/layer_spec.h"

namespace lockstep {
namespace testing {

// Builds `json` (a layer object) over inputs of `shapes`; fails the test
// and returns null on an error. `find_layer` resolves tied_to.
std::unique_ptr<Layer> BuildLayer(
    const std::string& json, const std::vector<Shape>& shapes,
    ParamNaming naming = ParamNaming::kKeras,
    std::function<Layer*(const std::string&)> find_layer = nullptr);
// The error building it gives ("" when it builds).
std::string BuildError(const std::string& json,
                       const std::vector<Shape>& shapes,
                       ParamNaming naming = ParamNaming::kKeras);

std::vector<float> RandomVector(int64_t n, uint32_t seed, float lo = -1,
                                float hi = 1);

// Runs the layer on `inputs` (n samples each) and checks every parameter's
// gradient and the gradient of every input marked in `differentiable`
// against central differences (step eps, tolerance tol relative to
// 1 + |numeric|); kMovingAverage params are not gradients and are skipped. Input gradients are also checked to be written in full
// (the buffers start as garbage).
void GradCheck(Layer& layer, int64_t n, const PassContext& ctx,
               std::vector<std::vector<float>> inputs,
               const std::vector<bool>& differentiable, double tol = 2e-3,
               float eps = 2e-3f);
// One input in [-2, 2], differentiable.
void GradCheck(Layer& layer, int64_t n, const PassContext& ctx,
               double tol = 2e-3);

// Forward only: the output for `inputs`.
std::vector<float> RunForward(Layer& layer, int64_t n, const PassContext& ctx,
                              const std::vector<std::vector<float>>& inputs);

}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LAYERS_TEST_UTIL_H_
