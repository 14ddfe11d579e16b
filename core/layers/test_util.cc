// Layer test helpers.
#include "core/layers/test_util.h"

#include <cmath>
#include <random>

#include "core/json_util.h"
#include "core/layers/registry.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace testing {
namespace {

absl::StatusOr<std::unique_ptr<Layer>> Build(
    const std::string& json, const std::vector<Shape>& shapes,
    ParamNaming naming, std::function<Layer*(const std::string&)> find) {
  absl::StatusOr<LayerSpec> spec = LayerFromJson(json);
  if (!spec.ok()) return spec.status();
  const LayerTypeInfo* info = FindLayerType(spec->type);
  if (info == nullptr || !info->create) {
    return absl::InvalidArgumentError("not a layer type: " + spec->type);
  }
  absl::StatusOr<spec_reader::Json> config =
      ParseOrderedJson(spec->config, "config");
  if (!config.ok()) return config.status();
  LayerBuildContext ctx;
  ctx.name = spec->name.empty() ? "l" : spec->name;
  ctx.where = "layer (" + ctx.name + ")";
  ctx.inputs = shapes;
  for (size_t i = 0; i < shapes.size(); ++i) {
    ctx.input_names.push_back("in" + std::to_string(i));
  }
  ctx.init_seed = 7;
  ctx.naming = naming;
  ctx.find_layer = std::move(find);
  return info->create(*config, ctx);
}

}  // namespace

std::unique_ptr<Layer> BuildLayer(
    const std::string& json, const std::vector<Shape>& shapes,
    ParamNaming naming, std::function<Layer*(const std::string&)> find_layer) {
  absl::StatusOr<std::unique_ptr<Layer>> l =
      Build(json, shapes, naming, std::move(find_layer));
  EXPECT_TRUE(l.ok()) << l.status();
  return l.ok() ? std::move(*l) : nullptr;
}

std::string BuildError(const std::string& json,
                       const std::vector<Shape>& shapes, ParamNaming naming) {
  absl::StatusOr<std::unique_ptr<Layer>> l =
      Build(json, shapes, naming, nullptr);
  return l.ok() ? "" : std::string(l.status().message());
}

std::vector<float> RandomVector(int64_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

std::vector<float> RunForward(Layer& layer, int64_t n, const PassContext& ctx,
                              const std::vector<std::vector<float>>& inputs) {
  if (layer.PassesThrough(ctx)) return inputs[0];
  LayerIO io;
  io.n = n;
  for (const auto& x : inputs) io.x.push_back(x.data());
  for (Param* p : layer.params()) {
    io.w.push_back(p->value.data());
    io.dw.push_back(p->grad.data());
  }
  std::vector<float> y(n * layer.output_size());
  io.y = y.data();
  layer.Forward(io, ctx);
  return y;
}

void GradCheck(Layer& layer, int64_t n, const PassContext& ctx,
               std::vector<std::vector<float>> inputs,
               const std::vector<bool>& differentiable, double tol, float eps) {
  const std::vector<float> w = RandomVector(n * layer.output_size(), 12);
  auto loss = [&]() {
    const std::vector<float> y = RunForward(layer, n, ctx, inputs);
    double s = 0;
    for (size_t i = 0; i < w.size(); ++i) s += double{w[i]} * y[i];
    return s;
  };
  LayerIO io;
  io.n = n;
  std::vector<float> y(n * layer.output_size());
  for (const auto& x : inputs) io.x.push_back(x.data());
  for (Param* p : layer.params()) {
    p->grad.SetZero();
    io.w.push_back(p->value.data());
    io.dw.push_back(p->grad.data());
  }
  io.y = y.data();
  if (!layer.PassesThrough(ctx)) layer.Forward(io, ctx);
  std::vector<float> dy = w;
  std::vector<std::vector<float>> dx(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (differentiable[k]) {
      dx[k].assign(inputs[k].size(), 123.0f);  // must be overwritten
      io.dx.push_back(dx[k].data());
    } else {
      io.dx.push_back(nullptr);
    }
  }
  io.dy = dy.data();
  if (!layer.PassesThrough(ctx)) layer.Backward(io, ctx);
  auto check = [&](float* v, double analytic, const std::string& what) {
    const float saved = *v;
    *v = saved + eps;
    const double up = loss();
    *v = saved - eps;
    const double down = loss();
    *v = saved;
    const double numeric = (up - down) / (2 * eps);
    EXPECT_NEAR(analytic, numeric, tol * (1 + std::fabs(numeric))) << what;
  };
  for (Param* p : layer.params()) {
    // A moving average's "gradient" is a batch statistic (core/tensor.h),
    // which the layer's own tests check.
    if (p->update != ParamUpdate::kOptimizer) continue;
    const std::vector<float> grad = p->grad.values();
    for (int64_t i = 0; i < p->value.size(); ++i) {
      check(p->value.data() + i, grad[i],
            p->name + "[" + std::to_string(i) + "]");
    }
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!differentiable[k]) continue;
    for (size_t i = 0; i < inputs[k].size(); ++i) {
      check(inputs[k].data() + i, dx[k][i],
            "x" + std::to_string(k) + "[" + std::to_string(i) + "]");
    }
  }
}

void GradCheck(Layer& layer, int64_t n, const PassContext& ctx, double tol) {
  GradCheck(layer, n, ctx, {RandomVector(n * layer.input_size(0), 11, -2, 2)},
            {true}, tol);
}

}  // namespace testing
}  // namespace lockstep
