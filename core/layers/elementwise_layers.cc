// add, gelu and activation: their fields and CPU passes.
#include "core/layers/elementwise_layers.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/layers/common.h"
#include "core/layers/registry.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

using spec_reader::Json;
using spec_reader::Reader;

constexpr int64_t kGrain = 1 << 15;

struct NoFields {};
absl::Status ReadNothing(const Reader&, NoFields*) { return absl::OkStatus(); }
Json NothingToJson(const NoFields&) { return Json::object(); }

absl::StatusOr<std::unique_ptr<Layer>> CreateAdd(const NoFields&,
                                                 const LayerBuildContext& ctx) {
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    if (ctx.inputs[i] != ctx.inputs[0]) {
      return ctx.Error(absl::StrCat(
          "inputs ", ctx.input_names[0], " ", ShapeToString(ctx.inputs[0]),
          " and ", ctx.input_names[i], " ", ShapeToString(ctx.inputs[i]),
          " differ in shape; add needs one shape"));
    }
  }
  return std::unique_ptr<Layer>(
      std::make_unique<AddLayer>(ctx.name, ctx.inputs));
}

absl::StatusOr<std::unique_ptr<Layer>> CreateGelu(
    const NoFields&, const LayerBuildContext& ctx) {
  return std::unique_ptr<Layer>(
      std::make_unique<GeluLayer>(ctx.name, ctx.inputs[0]));
}

struct ActivationConfig {
  Activation activation = Activation::kRelu;
};

absl::Status ReadActivation(const Reader& r, ActivationConfig* c) {
  RETURN_IF_ERROR(r.Require("activation"));
  RETURN_IF_ERROR(
      r.Enum("activation", "activation", Activations(), &c->activation));
  if (c->activation == Activation::kGelu) {
    return spec_reader::Bad(r.At("activation"), "use the gelu layer for GELU");
  }
  return absl::OkStatus();
}

Json ActivationToJson(const ActivationConfig& c) {
  Json j;
  j["activation"] = spec_reader::NameOf(Activations(), c.activation);
  return j;
}

absl::StatusOr<std::unique_ptr<Layer>> CreateActivation(
    const ActivationConfig& c, const LayerBuildContext& ctx) {
  return std::unique_ptr<Layer>(std::make_unique<ActivationLayer>(
      ctx.name, ctx.inputs[0], ToActivationKind(c.activation)));
}

LOCKSTEP_REGISTER_LAYER(add,
                        MakeLayerType<NoFields>("add", "add", {}, 2, -1,
                                                &ReadNothing, &NothingToJson,
                                                &CreateAdd));
LOCKSTEP_REGISTER_LAYER(gelu,
                        MakeLayerType<NoFields>("gelu", "gelu", {}, 1, 1,
                                                &ReadNothing, &NothingToJson,
                                                &CreateGelu));
LOCKSTEP_REGISTER_LAYER(activation, MakeLayerType<ActivationConfig>(
                                        "activation", "activation",
                                        {"activation"}, 1, 1, &ReadActivation,
                                        &ActivationToJson, &CreateActivation));

}  // namespace

AddLayer::AddLayer(const std::string& name, const std::vector<Shape>& inputs)
    : Layer("add", name, inputs, inputs[0]) {}

void AddLayer::Forward(const LayerIO& io, const PassContext&) {
  const int64_t n = io.n * output_size();
  const size_t k = io.x.size();
  ParallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    std::copy(io.x[0] + b, io.x[0] + e, io.y + b);
    for (size_t i = 1; i < k; ++i) {
      const float* __restrict x = io.x[i];
      float* __restrict y = io.y;
      for (int64_t j = b; j < e; ++j) y[j] += x[j];
    }
  });
}

void AddLayer::Backward(const LayerIO& io, const PassContext&) {
  const size_t bytes = sizeof(float) * io.n * output_size();
  for (float* dx : io.dx) {
    if (dx != nullptr && dx != io.dy) std::memcpy(dx, io.dy, bytes);
  }
}

GeluLayer::GeluLayer(const std::string& name, const Shape& input)
    : Layer("gelu", name, {input}, input) {}

void GeluLayer::Forward(const LayerIO& io, const PassContext&) {
  GeluForward(io.n * output_size(), io.x[0], io.y);
}

void GeluLayer::Backward(const LayerIO& io, const PassContext&) {
  if (io.dx[0] != nullptr) {
    GeluBackward(io.n * output_size(), io.x[0], io.dy, io.dx[0]);
  }
}

ActivationLayer::ActivationLayer(const std::string& name, const Shape& input,
                                 ActivationKind act)
    : Layer("activation", name, {input}, input), act_(act) {}

void ActivationLayer::Forward(const LayerIO& io, const PassContext& ctx) {
  const int64_t n = io.n * output_size();
  if (io.y != io.x[0]) std::copy(io.x[0], io.x[0] + n, io.y);
  // A final softmax or sigmoid the loss fuses is left out, as dense does.
  const bool skip =
      ctx.skip_output_activation &&
      (act_ == ActivationKind::kSoftmax || act_ == ActivationKind::kSigmoid);
  if (!skip) BiasActivationForward(Rows(io.n), Cols(), nullptr, act_, io.y);
}

void ActivationLayer::Backward(const LayerIO& io, const PassContext& ctx) {
  if (io.dx[0] == nullptr) return;
  const bool skip =
      ctx.skip_output_activation &&
      (act_ == ActivationKind::kSoftmax || act_ == ActivationKind::kSigmoid);
  if (!skip) ActivationBackward(Rows(io.n), Cols(), act_, io.y, io.dy);
  if (io.dx[0] != io.dy) {
    std::copy(io.dy, io.dy + io.n * output_size(), io.dx[0]);
  }
}

}  // namespace lockstep
