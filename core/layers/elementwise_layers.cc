// add and gelu: their fields (none) and CPU passes.
#include "core/layers/elementwise_layers.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
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

LOCKSTEP_REGISTER_LAYER(add,
                        MakeLayerType<NoFields>("add", "add", {}, 2, -1,
                                                &ReadNothing, &NothingToJson,
                                                &CreateAdd));
LOCKSTEP_REGISTER_LAYER(gelu,
                        MakeLayerType<NoFields>("gelu", "gelu", {}, 1, 1,
                                                &ReadNothing, &NothingToJson,
                                                &CreateGelu));

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

}  // namespace lockstep
