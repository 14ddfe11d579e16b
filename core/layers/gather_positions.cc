// gather_positions: a row copy forward, a scatter-add backward.
#include "core/layers/gather_positions.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/layers/registry.h"

namespace lockstep {
namespace {

using spec_reader::Json;
using spec_reader::Reader;

struct NoFields {};
absl::Status ReadNothing(const Reader&, NoFields*) { return absl::OkStatus(); }
Json NothingToJson(const NoFields&) { return Json::object(); }

absl::StatusOr<std::unique_ptr<Layer>> Create(const NoFields&,
                                              const LayerBuildContext& ctx) {
  if (ctx.inputs[0].size() != 2 || ctx.inputs[1].size() != 1) {
    return ctx.Error(absl::StrCat(
        "takes a sequence [length, width] and positions [count], got ",
        ShapeToString(ctx.inputs[0]), " and ", ShapeToString(ctx.inputs[1])));
  }
  return std::unique_ptr<Layer>(std::make_unique<GatherPositionsLayer>(
      ctx.name, ctx.inputs[0], ctx.inputs[1]));
}

LOCKSTEP_REGISTER_LAYER(gather_positions,
                        MakeLayerType<NoFields>("gather_positions",
                                                "gather_positions", {}, 2, 2,
                                                &ReadNothing, &NothingToJson,
                                                &Create));

// A position value as a row index, or -1 when it is not one.
int64_t Row(float f, int64_t length) {
  const int64_t p = static_cast<int64_t>(f);
  return p >= 0 && p < length && f == static_cast<float>(p) ? p : -1;
}

}  // namespace

GatherPositionsLayer::GatherPositionsLayer(const std::string& name,
                                           const Shape& x,
                                           const Shape& positions)
    : Layer("gather_positions", name, {x, positions}, {positions[0], x[1]}) {}

void GatherPositionsLayer::Forward(const LayerIO& io, const PassContext&) {
  const int64_t l = length(), w = width(), p = count();
  for (int64_t s = 0; s < io.n; ++s) {
    for (int64_t i = 0; i < p; ++i) {
      const int64_t row = Row(io.x[1][s * p + i], l);
      float* out = io.y + (s * p + i) * w;
      if (row < 0) {
        std::fill(out, out + w, 0.0f);
      } else {
        std::memcpy(out, io.x[0] + (s * l + row) * w, sizeof(float) * w);
      }
    }
  }
}

void GatherPositionsLayer::Backward(const LayerIO& io, const PassContext&) {
  const int64_t l = length(), w = width(), p = count();
  if (io.dx[1] != nullptr) std::fill(io.dx[1], io.dx[1] + io.n * p, 0.0f);
  float* dx = io.dx[0];
  if (dx == nullptr) return;
  std::fill(dx, dx + io.n * l * w, 0.0f);
  for (int64_t s = 0; s < io.n; ++s) {
    for (int64_t i = 0; i < p; ++i) {
      const int64_t row = Row(io.x[1][s * p + i], l);
      if (row < 0) continue;
      float* __restrict d = dx + (s * l + row) * w;
      const float* __restrict g = io.dy + (s * p + i) * w;
      for (int64_t c = 0; c < w; ++c) d[c] += g[c];
    }
  }
}

}  // namespace lockstep
