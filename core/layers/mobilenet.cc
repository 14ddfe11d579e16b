// The inverted_residual and mobilenet_v2 blocks: fields and expansion into
// conv2d, depthwise_conv2d, batch_norm, add, global average pooling, dropout
// and dense layers, named as torchvision's modules (core/layers/mobilenet.h).
#include "core/layers/mobilenet.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/status_macros.h"
#include "core/json_util.h"
#include "core/layers/registry.h"

namespace lockstep {

int64_t MakeDivisible(double v, int64_t divisor) {
  int64_t out = std::max<int64_t>(
      divisor, static_cast<int64_t>(v + divisor / 2.0) / divisor * divisor);
  if (static_cast<double>(out) < 0.9 * v) out += divisor;
  return out;
}

namespace {

using spec_reader::Json;
using spec_reader::Reader;

absl::Status ReadBlockNorm(const Reader& r, BlockNorm* c) {
  RETURN_IF_ERROR(
      r.Number("momentum", spec_reader::kUnitClosed, &c->momentum));
  RETURN_IF_ERROR(r.Number("epsilon", spec_reader::kPositive, &c->epsilon));
  return r.Bool("sync", &c->sync);
}

void BlockNormToJson(const BlockNorm& c, Json* j) {
  (*j)["momentum"] = c.momentum;
  (*j)["epsilon"] = c.epsilon;
  if (c.sync) (*j)["sync"] = true;
}

// Appends a bias-free convolution (depthwise when `depthwise`) named `conv`
// and its batch norm named `norm` (with ReLU6 unless `linear`) over `x`;
// returns the norm's name.
std::string ConvNorm(std::vector<LayerSpec>* out, const std::string& conv,
                     const std::string& norm, const std::string& x,
                     int64_t filters, int64_t kernel, int64_t stride,
                     bool depthwise, bool linear, const BlockNorm& norm_fields) {
  Json c = {{"kernel_size", kernel},
            {"strides", stride},
            {"padding", (kernel - 1) / 2},
            {"activation", "linear"},
            {"use_bias", false}};
  if (!depthwise) c["filters"] = filters;
  out->push_back(SubLayer(depthwise ? "depthwise_conv2d" : "conv2d", conv, {x}, c));
  out->push_back(SubLayer("batch_norm", norm, {conv},
                      {{"momentum", norm_fields.momentum},
                       {"epsilon", norm_fields.epsilon},
                       {"sync", norm_fields.sync},
                       {"activation", linear ? "linear" : "relu6"}}));
  return norm;
}

// Names a sub-layer: torchvision's module path `torch` under `prefix.`, or
// `prefix/keras`.
struct Namer {
  std::string prefix;
  bool torch;
  std::string operator()(const std::string& keras,
                         const std::string& torch_path) const {
    if (torch) return prefix.empty() ? torch_path : prefix + "." + torch_path;
    return prefix + "/" + keras;
  }
};

// One inverted residual over `x` (channels `in`); returns its output's name.
std::string InvertedResidual(std::vector<LayerSpec>* out, const Namer& name,
                             const std::string& x, int64_t in,
                             const InvertedResidualConfig& c) {
  const int64_t hidden = in * c.expansion;
  std::string h = x;
  int k = 0;  // torchvision's index in the block's `conv` Sequential
  if (c.expansion != 1) {
    h = ConvNorm(out, name("expand", "conv.0.0"),
                 name("expand_bn", "conv.0.1"), h, hidden, 1, 1, false, false,
                 c.norm);
    k = 1;
  }
  h = ConvNorm(out, name("depthwise", absl::StrCat("conv.", k, ".0")),
               name("depthwise_bn", absl::StrCat("conv.", k, ".1")), h, hidden,
               3, c.strides, true, false, c.norm);
  h = ConvNorm(out, name("project", absl::StrCat("conv.", k + 1)),
               name("project_bn", absl::StrCat("conv.", k + 2)), h, c.filters,
               1, 1, false, true, c.norm);
  if (c.strides == 1 && in == c.filters) {
    const std::string add = name("add", "add");
    out->push_back(SubLayer("add", add, {h, x}, Json::object()));
    h = add;
  }
  return h;
}

absl::Status CheckImage(const BlockContext& ctx) {
  const Shape& x = ctx.input_shapes[0];
  if (x.size() == 3 && x[0] > 0 && x[1] > 0 && x[2] > 0) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(ctx.where, ": expects an image input [height, width, "
                              "channels], got ",
                   ShapeToString(x)));
}

// --- inverted_residual ---------------------------------------------------

absl::Status ReadInvertedResidual(const Reader& r, InvertedResidualConfig* c) {
  RETURN_IF_ERROR(r.Require("filters", "an inverted_residual block"));
  RETURN_IF_ERROR(r.Int("filters", 1, &c->filters));
  RETURN_IF_ERROR(r.Int("strides", 1, &c->strides, 2));
  RETURN_IF_ERROR(r.Int("expansion", 1, &c->expansion, 64));
  return ReadBlockNorm(r, &c->norm);
}

Json InvertedResidualToJson(const InvertedResidualConfig& c) {
  Json j;
  j["filters"] = c.filters;
  j["strides"] = c.strides;
  j["expansion"] = c.expansion;
  BlockNormToJson(c.norm, &j);
  return j;
}

absl::StatusOr<std::vector<LayerSpec>> ExpandInvertedResidual(
    const InvertedResidualConfig& c, const BlockContext& ctx) {
  RETURN_IF_ERROR(CheckImage(ctx));
  std::vector<LayerSpec> out;
  const Namer name{ctx.name, ctx.naming == ParamNaming::kTorch};
  InvertedResidual(&out, name, ctx.inputs[0], ctx.input_shapes[0][2], c);
  return out;
}

LOCKSTEP_REGISTER_LAYER(
    inverted_residual,
    MakeBlockType<InvertedResidualConfig>(
        "inverted_residual", "inverted_residual",
        {"filters", "strides", "expansion", "momentum", "epsilon", "sync"}, 1, 1,
        &ReadInvertedResidual, &InvertedResidualToJson,
        &ExpandInvertedResidual));

// --- mobilenet_v2 ----------------------------------------------------------

absl::Status ReadMobileNet(const Reader& r, MobileNetV2Config* c) {
  RETURN_IF_ERROR(r.Number("alpha", spec_reader::kPositive, &c->alpha));
  if (c->alpha > 4) {
    return spec_reader::Bad(
        r.At("alpha"),
        absl::StrCat("must be in (0, 4], got ", spec_reader::Got(r.Get("alpha"))));
  }
  RETURN_IF_ERROR(r.Bool("include_top", &c->include_top));
  RETURN_IF_ERROR(r.Int("classes", 1, &c->classes, 1 << 20));
  RETURN_IF_ERROR(r.Number("dropout", spec_reader::kUnitOpen, &c->dropout));
  return ReadBlockNorm(r, &c->norm);
}

Json MobileNetToJson(const MobileNetV2Config& c) {
  Json j;
  j["alpha"] = c.alpha;
  j["include_top"] = c.include_top;
  j["classes"] = c.classes;
  j["dropout"] = c.dropout;
  BlockNormToJson(c.norm, &j);
  return j;
}

absl::StatusOr<std::vector<LayerSpec>> ExpandMobileNet(
    const MobileNetV2Config& c, const BlockContext& ctx) {
  RETURN_IF_ERROR(CheckImage(ctx));
  const bool torch = ctx.naming == ParamNaming::kTorch;
  // torchvision's module paths as they are, or under the block's name with
  // '_' for '.'.
  auto name = [&](const std::string& path) {
    return torch ? path
                 : absl::StrCat(ctx.name, "/",
                                absl::StrReplaceAll(path, {{".", "_"}}));
  };
  std::vector<LayerSpec> out;
  int64_t channels = MakeDivisible(32 * c.alpha);
  std::string x = ConvNorm(&out, name("features.0.0"), name("features.0.1"),
                           ctx.inputs[0], channels, 3, 2, false, false,
                           c.norm);
  // The paper's table 2: expansion t, channels c, repeats n, first stride s.
  struct Stage {
    int64_t t, c, n, s;
  };
  const Stage stages[] = {{1, 16, 1, 1},  {6, 24, 2, 2},  {6, 32, 3, 2},
                          {6, 64, 4, 2},  {6, 96, 3, 1},  {6, 160, 3, 2},
                          {6, 320, 1, 1}};
  int feature = 1;
  for (const Stage& st : stages) {
    const int64_t filters = MakeDivisible(st.c * c.alpha);
    for (int64_t i = 0; i < st.n; ++i, ++feature) {
      InvertedResidualConfig ir;
      ir.filters = filters;
      ir.strides = i == 0 ? st.s : 1;
      ir.expansion = st.t;
      ir.norm = c.norm;
      const std::string block = absl::StrCat("features.", feature);
      const Namer sub = torch ? Namer{block, true}
                              : Namer{name(block), false};
      x = InvertedResidual(&out, sub, x, channels, ir);
      channels = filters;
    }
  }
  const int64_t last = MakeDivisible(1280 * std::max(1.0, c.alpha));
  const std::string head = absl::StrCat("features.", feature);
  x = ConvNorm(&out, name(head + ".0"), name(head + ".1"), x, last, 1, 1,
               false, false, c.norm);
  if (!c.include_top) return out;
  out.push_back(SubLayer("global_average_pooling2d", name("pool"), {x},
                     {{"keepdims", false}}));
  out.push_back(
      SubLayer("dropout", name("classifier.0"), {name("pool")},
           {{"rate", c.dropout}}));
  out.push_back(SubLayer("dense", name("classifier.1"), {name("classifier.0")},
                     {{"units", c.classes},
                      {"activation", "linear"},
                      {"use_bias", true}}));
  return out;
}

LayerTypeInfo MobileNetType() {
  LayerTypeInfo info = MakeBlockType<MobileNetV2Config>(
      "mobilenet_v2", "mobilenet_v2",
      {"alpha", "include_top", "classes", "dropout", "momentum", "epsilon",
       "sync"},
      1, 1, &ReadMobileNet, &MobileNetToJson, &ExpandMobileNet);
  info.preset_inputs = {"input"};
  return info;
}

LOCKSTEP_REGISTER_LAYER(mobilenet_v2, MobileNetType());

}  // namespace
}  // namespace lockstep
