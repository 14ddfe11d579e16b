// CreateLayer: the per-layer checks of a model spec, with errors that say
// which layer is wrong and what to change.
#include "core/layer.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/layers.h"

namespace lockstep {
namespace {

const char* PaddingName(Padding p) {
  return p == Padding::kSame ? "same" : "valid";
}

}  // namespace

const char* DefaultLayerStem(LayerType type) {
  switch (type) {
    case LayerType::kDense:
      return "dense";
    case LayerType::kConv2D:
      return "conv2d";
    case LayerType::kMaxPool2D:
      return "max_pooling2d";
    case LayerType::kFlatten:
      return "flatten";
    case LayerType::kDropout:
      return "dropout";
  }
  return "layer";
}

absl::StatusOr<std::unique_ptr<Layer>> CreateLayer(const LayerSpec& spec,
                                                   int index,
                                                   const std::string& name,
                                                   const Shape& in,
                                                   uint64_t init_seed) {
  const std::string where =
      absl::StrFormat("model.layers[%d] (%s): ", index, name);
  auto error = [&](const std::string& msg) {
    return absl::InvalidArgumentError(absl::StrCat(where, msg));
  };
  auto expect_image = [&]() -> absl::Status {
    if (in.size() == 3) return absl::OkStatus();
    return error(absl::StrCat(
        "expects an image input [height, width, channels], got ",
        ShapeToString(in),
        index == 0 ? "; set model.input_shape to [height, width, channels]"
                   : "; image layers must come before flatten and dense"));
  };
  switch (spec.type) {
    case LayerType::kDense:
      if (in.size() != 1) {
        return error(absl::StrCat("expects a flat input, got ",
                                  ShapeToString(in),
                                  "; add a flatten layer before it"));
      }
      if (spec.units <= 0) {
        return error(absl::StrCat("units must be > 0, got ", spec.units));
      }
      return std::unique_ptr<Layer>(std::make_unique<DenseLayer>(
          name, in[0], spec.units, spec.activation, spec.use_bias, init_seed));
    case LayerType::kConv2D: {
      if (absl::Status s = expect_image(); !s.ok()) return s;
      if (spec.filters <= 0) {
        return error(absl::StrCat("filters must be > 0, got ", spec.filters));
      }
      if (spec.kernel_h <= 0 || spec.kernel_w <= 0) {
        return error(absl::StrFormat("kernel_size must be > 0, got [%d, %d]",
                                     spec.kernel_h, spec.kernel_w));
      }
      if (spec.stride_h <= 0 || spec.stride_w <= 0) {
        return error(absl::StrFormat("strides must be > 0, got [%d, %d]",
                                     spec.stride_h, spec.stride_w));
      }
      if (spec.padding == Padding::kValid &&
          (spec.kernel_h > in[0] || spec.kernel_w > in[1])) {
        return error(absl::StrFormat(
            "kernel_size [%d, %d] is larger than its input %s with padding "
            "\"%s\"; use padding \"same\" or a smaller kernel",
            spec.kernel_h, spec.kernel_w, ShapeToString(in),
            PaddingName(spec.padding)));
      }
      return std::unique_ptr<Layer>(
          std::make_unique<Conv2DLayer>(name, in, spec, init_seed));
    }
    case LayerType::kMaxPool2D:
      if (absl::Status s = expect_image(); !s.ok()) return s;
      if (spec.pool_h <= 0 || spec.pool_w <= 0) {
        return error(absl::StrFormat("pool_size must be > 0, got [%d, %d]",
                                     spec.pool_h, spec.pool_w));
      }
      if (spec.pool_h > in[0] || spec.pool_w > in[1]) {
        return error(
            absl::StrFormat("pool_size [%d, %d] is larger than its input %s",
                            spec.pool_h, spec.pool_w, ShapeToString(in)));
      }
      return std::unique_ptr<Layer>(
          std::make_unique<MaxPool2DLayer>(name, in, spec.pool_h, spec.pool_w));
    case LayerType::kFlatten:
      return std::unique_ptr<Layer>(std::make_unique<FlattenLayer>(name, in));
    case LayerType::kDropout:
      if (!(spec.rate >= 0.0 && spec.rate < 1.0)) {
        return error(absl::StrCat("rate must be in [0, 1), got ", spec.rate));
      }
      return std::unique_ptr<Layer>(
          std::make_unique<DropoutLayer>(name, in, spec.rate));
  }
  return error("unknown layer type");
}

}  // namespace lockstep
