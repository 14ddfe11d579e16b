// max_pool2d, average_pooling2d, global_average_pooling2d, flatten and
// dropout: their fields and their CPU passes.
#include "core/layers/simple_layers.h"

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "core/layers/registry.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/dropout.h"

namespace lockstep {
namespace {

using spec_reader::Json;
using spec_reader::Reader;

absl::Status ReadPool(const Reader& r, Pool2DConfig* c) {
  RETURN_IF_ERROR(r.Pair("pool_size", &c->pool_h, &c->pool_w));
  c->stride_h = c->pool_h;  // Keras: strides default to pool_size
  c->stride_w = c->pool_w;
  RETURN_IF_ERROR(r.Pair("strides", &c->stride_h, &c->stride_w));
  RETURN_IF_ERROR(ReadConvPadding(r, &c->padding));
  return absl::OkStatus();
}

absl::Status ReadAvgPool(const Reader& r, Pool2DConfig* c) {
  RETURN_IF_ERROR(ReadPool(r, c));
  return r.Bool("count_include_pad", &c->count_include_pad);
}

Json PoolToJson(const Pool2DConfig& c) {
  Json j;
  j["pool_size"] = {c.pool_h, c.pool_w};
  j["strides"] = {c.stride_h, c.stride_w};
  j["padding"] = ConvPaddingToJson(c.padding);
  return j;
}

Json AvgPoolToJson(const Pool2DConfig& c) {
  Json j = PoolToJson(c);
  j["count_include_pad"] = c.count_include_pad;
  return j;
}

// The checks both pools make of their window and padding.
absl::Status CheckPool(const char* type, const Pool2DConfig& c,
                       const LayerBuildContext& ctx) {
  const Shape& in = ctx.inputs[0];
  RETURN_IF_ERROR(CheckImageInput(ctx));
  if (c.padding.mode == Padding::kSame) {
    return ctx.Error(absl::StrFormat(
        "padding \"same\" is not implemented for %s; use \"valid\" "
        "or cells on each side (N or [H, W])",
        type));
  }
  if (2 * c.padding.h > c.pool_h || 2 * c.padding.w > c.pool_w) {
    return ctx.Error(absl::StrFormat(
        "padding [%d, %d] is more than half of pool_size [%d, %d] (a window "
        "would hold only padding)",
        c.padding.h, c.padding.w, c.pool_h, c.pool_w));
  }
  if (c.pool_h > in[0] + 2 * c.padding.h ||
      c.pool_w > in[1] + 2 * c.padding.w) {
    return ctx.Error(
        absl::StrFormat("pool_size [%d, %d] is larger than its input %s",
                        c.pool_h, c.pool_w, ShapeToString(in)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Layer>> CreatePool(
    const Pool2DConfig& c, const LayerBuildContext& ctx) {
  RETURN_IF_ERROR(CheckPool("max_pool2d", c, ctx));
  return std::unique_ptr<Layer>(
      std::make_unique<MaxPool2DLayer>(c, ctx.name, ctx.inputs[0]));
}

absl::StatusOr<std::unique_ptr<Layer>> CreateAvgPool(
    const Pool2DConfig& c, const LayerBuildContext& ctx) {
  RETURN_IF_ERROR(CheckPool("average_pooling2d", c, ctx));
  return std::unique_ptr<Layer>(
      std::make_unique<AvgPool2DLayer>(c, ctx.name, ctx.inputs[0]));
}

// [out_h, out_w, C] of a pool over `in`.
Shape PoolOutput(const Pool2DConfig& c, const Shape& in) {
  return {(in[0] + 2 * c.padding.h - c.pool_h) / c.stride_h + 1,
          (in[1] + 2 * c.padding.w - c.pool_w) / c.stride_w + 1, in[2]};
}

Pool2DGeometry PoolGeometry(const Pool2DConfig& c, const Shape& in, int64_t n) {
  return Pool2DGeometry::Make(n, in[0], in[1], in[2], c.pool_h, c.pool_w,
                              c.stride_h, c.stride_w, c.padding.h, c.padding.w);
}

LOCKSTEP_REGISTER_LAYER(
    max_pool2d,
    MakeLayerType<Pool2DConfig>("max_pool2d", "max_pooling2d",
                                {"pool_size", "strides", "padding"}, 1, 1,
                                &ReadPool, &PoolToJson, &CreatePool));

LOCKSTEP_REGISTER_LAYER(
    average_pooling2d,
    MakeLayerType<Pool2DConfig>("average_pooling2d", "average_pooling2d",
                                {"pool_size", "strides", "padding",
                                 "count_include_pad"},
                                1, 1, &ReadAvgPool, &AvgPoolToJson,
                                &CreateAvgPool));

struct NoConfig {};

absl::Status ReadNothing(const Reader&, NoConfig*) { return absl::OkStatus(); }
Json NothingToJson(const NoConfig&) { return Json::object(); }

struct GlobalAvgPoolConfig {
  bool keepdims = false;
};

absl::Status ReadGlobalAvgPool(const Reader& r, GlobalAvgPoolConfig* c) {
  return r.Bool("keepdims", &c->keepdims);
}

Json GlobalAvgPoolToJson(const GlobalAvgPoolConfig& c) {
  Json j;
  j["keepdims"] = c.keepdims;
  return j;
}

absl::StatusOr<std::unique_ptr<Layer>> CreateGlobalAvgPool(
    const GlobalAvgPoolConfig& c, const LayerBuildContext& ctx) {
  RETURN_IF_ERROR(CheckImageInput(ctx));
  return std::unique_ptr<Layer>(std::make_unique<GlobalAvgPool2DLayer>(
      ctx.name, ctx.inputs[0], c.keepdims));
}

LOCKSTEP_REGISTER_LAYER(global_average_pooling2d,
                        MakeLayerType<GlobalAvgPoolConfig>(
                            "global_average_pooling2d",
                            "global_average_pooling2d", {"keepdims"}, 1, 1,
                            &ReadGlobalAvgPool, &GlobalAvgPoolToJson,
                            &CreateGlobalAvgPool));

absl::StatusOr<std::unique_ptr<Layer>> CreateFlatten(
    const NoConfig&, const LayerBuildContext& ctx) {
  const Shape& in = ctx.inputs[0];
  const bool channels_first = ctx.naming == ParamNaming::kTorch &&
                              in.size() == 3 && in[2] > 1 && in[0] * in[1] > 1;
  return std::unique_ptr<Layer>(
      std::make_unique<FlattenLayer>(ctx.name, in, channels_first));
}

LOCKSTEP_REGISTER_LAYER(flatten,
                        MakeLayerType<NoConfig>("flatten", "flatten", {}, 1, 1,
                                                &ReadNothing, &NothingToJson,
                                                &CreateFlatten));

struct DropoutConfig {
  double rate = 0;
};

absl::Status ReadDropout(const Reader& r, DropoutConfig* c) {
  RETURN_IF_ERROR(r.Require("rate", "a dropout layer"));
  return r.Number("rate", spec_reader::kUnitOpen, &c->rate);
}

Json DropoutToJson(const DropoutConfig& c) {
  Json j;
  j["rate"] = c.rate;
  return j;
}

absl::StatusOr<std::unique_ptr<Layer>> CreateDropout(
    const DropoutConfig& c, const LayerBuildContext& ctx) {
  return std::unique_ptr<Layer>(
      std::make_unique<DropoutLayer>(ctx.name, ctx.inputs[0], c.rate));
}

LOCKSTEP_REGISTER_LAYER(
    dropout,
    MakeLayerType<DropoutConfig>("dropout", "dropout", {"rate"}, 1, 1,
                                 &ReadDropout, &DropoutToJson, &CreateDropout));

}  // namespace

MaxPool2DLayer::MaxPool2DLayer(const Pool2DConfig& config,
                               const std::string& name,
                               const Shape& input_shape)
    : Layer("max_pool2d", name, {input_shape}, PoolOutput(config, input_shape)),
      config_(config) {}

Pool2DGeometry MaxPool2DLayer::Geometry(int64_t n) const {
  return PoolGeometry(config_, input_shape(), n);
}

void MaxPool2DLayer::Forward(const LayerIO& io, const PassContext&) {
  const int64_t need = io.n * output_size();
  if (static_cast<int64_t>(argmax_.size()) < need) argmax_.resize(need);
  MaxPool2DForward(Geometry(io.n), io.x[0], io.y, argmax_.data());
}

void MaxPool2DLayer::Backward(const LayerIO& io, const PassContext&) {
  if (io.dx[0] != nullptr) {
    MaxPool2DBackward(Geometry(io.n), io.dy, argmax_.data(), io.dx[0]);
  }
}

AvgPool2DLayer::AvgPool2DLayer(const Pool2DConfig& config,
                               const std::string& name,
                               const Shape& input_shape)
    : Layer("average_pooling2d", name, {input_shape},
            PoolOutput(config, input_shape)),
      config_(config) {}

Pool2DGeometry AvgPool2DLayer::Geometry(int64_t n) const {
  return PoolGeometry(config_, input_shape(), n);
}

void AvgPool2DLayer::Forward(const LayerIO& io, const PassContext&) {
  AvgPool2DForward(Geometry(io.n), config_.count_include_pad, io.x[0], io.y);
}

void AvgPool2DLayer::Backward(const LayerIO& io, const PassContext&) {
  if (io.dx[0] != nullptr) {
    AvgPool2DBackward(Geometry(io.n), config_.count_include_pad, io.dy,
                      io.dx[0]);
  }
}

GlobalAvgPool2DLayer::GlobalAvgPool2DLayer(const std::string& name,
                                           const Shape& input_shape,
                                           bool keepdims)
    : Layer("global_average_pooling2d", name, {input_shape},
            keepdims ? Shape{1, 1, input_shape[2]} : Shape{input_shape[2]}) {}

void GlobalAvgPool2DLayer::Forward(const LayerIO& io, const PassContext&) {
  GlobalAvgPool2DForward(io.n, positions(), channels(), io.x[0], io.y);
}

void GlobalAvgPool2DLayer::Backward(const LayerIO& io, const PassContext&) {
  if (io.dx[0] != nullptr) {
    GlobalAvgPool2DBackward(io.n, positions(), channels(), io.dy, io.dx[0]);
  }
}

FlattenLayer::FlattenLayer(const std::string& name, const Shape& input_shape,
                           bool channels_first)
    : Layer("flatten", name, {input_shape}, {NumElements(input_shape)}),
      channels_first_(channels_first) {}

void FlattenLayer::Forward(const LayerIO& io, const PassContext&) {
  NhwcToNchw(io.n, positions(), channels(), io.x[0], io.y);
}

void FlattenLayer::Backward(const LayerIO& io, const PassContext&) {
  if (io.dx[0] != nullptr) {
    NchwToNhwc(io.n, positions(), channels(), io.dy, io.dx[0]);
  }
}

DropoutLayer::DropoutLayer(const std::string& name, const Shape& input_shape,
                           double rate)
    : Layer("dropout", name, {input_shape}, input_shape),
      rate_(static_cast<float>(rate)) {}

void DropoutLayer::Forward(const LayerIO& io, const PassContext& ctx) {
  DropoutForward(io.n * input_size(), rate_, ctx.dropout_seed, io.x[0], io.y);
}

void DropoutLayer::Backward(const LayerIO& io, const PassContext& ctx) {
  if (io.dx[0] != nullptr) {
    DropoutBackward(io.n * input_size(), rate_, ctx.dropout_seed, io.dy,
                    io.dx[0]);
  }
}

}  // namespace lockstep
