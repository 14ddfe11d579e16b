// Activation and padding names, initializers.
#include "core/layers/common.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "core/param_init.h"
#include "core/random.h"

namespace lockstep {

using spec_reader::Bad;
using spec_reader::Got;
using spec_reader::Json;
using spec_reader::Reader;
using spec_reader::Table;

const Table<Activation>& Activations() {
  static const auto* t = new Table<Activation>{
      {"relu", Activation::kRelu},       {"gelu", Activation::kGelu},
      {"tanh", Activation::kTanh},       {"sigmoid", Activation::kSigmoid},
      {"softmax", Activation::kSoftmax}, {"linear", Activation::kLinear},
      {"relu6", Activation::kRelu6}};
  return *t;
}

ActivationKind ToActivationKind(Activation a) {
  switch (a) {
    case Activation::kRelu:
      return ActivationKind::kRelu;
    case Activation::kRelu6:
      return ActivationKind::kRelu6;
    case Activation::kTanh:
      return ActivationKind::kTanh;
    case Activation::kSigmoid:
      return ActivationKind::kSigmoid;
    case Activation::kSoftmax:
      return ActivationKind::kSoftmax;
    case Activation::kGelu:
    case Activation::kLinear:
      break;
  }
  return ActivationKind::kLinear;
}

const Table<Padding>& Paddings() {
  static const auto* t =
      new Table<Padding>{{"valid", Padding::kValid}, {"same", Padding::kSame}};
  return *t;
}

namespace {

struct InitName {
  const char* name;
  Initializer::Kind kind;
  const char* param;  // the object form's number, or null
  double default_scale;
};

const InitName kInits[] = {
    {"glorot_uniform", Initializer::kGlorotUniform, nullptr, 0},
    {"uniform", Initializer::kUniform, "limit", 0.05},
    {"truncated_normal", Initializer::kTruncatedNormal, "stddev", 0.02},
    {"zeros", Initializer::kZeros, nullptr, 0},
    {"ones", Initializer::kOnes, nullptr, 0},
};

const InitName* FindInit(const std::string& name) {
  for (const InitName& i : kInits) {
    if (name == i.name) return &i;
  }
  return nullptr;
}

}  // namespace

absl::Status ReadInitializer(const Reader& r, const char* key,
                             Initializer* out) {
  if (!r.Has(key)) return absl::OkStatus();
  const Json& v = r.Get(key);
  const std::string path = r.At(key);
  const char* expected =
      "; expected one of glorot_uniform, uniform, truncated_normal, zeros, "
      "ones";
  if (v.is_string()) {
    const InitName* i = FindInit(v.get<std::string>());
    if (i == nullptr) {
      return Bad(path, absl::StrCat("unknown initializer ", Got(v), expected));
    }
    out->kind = i->kind;
    out->scale = i->default_scale;
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(Reader::CheckObject(v, path));
  Reader o(v, path);
  RETURN_IF_ERROR(o.Require("type"));
  std::string type;
  RETURN_IF_ERROR(o.String("type", &type));
  const InitName* i = FindInit(type);
  if (i == nullptr) {
    return Bad(o.At("type"), absl::StrCat("unknown initializer ",
                                          Got(o.Get("type")), expected));
  }
  spec_reader::Keys keys = {"type"};
  if (i->param != nullptr) keys.push_back(i->param);
  RETURN_IF_ERROR(o.CheckKeys(keys));
  double scale = i->default_scale;
  if (i->param != nullptr) {
    RETURN_IF_ERROR(o.Number(i->param, spec_reader::kPositive, &scale));
  }
  out->kind = i->kind;
  out->scale = scale;
  return absl::OkStatus();
}

Json InitializerToJson(const Initializer& init) {
  for (const InitName& i : kInits) {
    if (i.kind != init.kind) continue;
    if (i.param == nullptr) return Json(i.name);
    Json j;
    j["type"] = i.name;
    j[i.param] = init.scale;
    return j;
  }
  return Json("glorot_uniform");
}

void Initialize(const Initializer& init, uint64_t seed, int64_t fan_in,
                int64_t fan_out, Tensor* t) {
  float* out = t->data();
  const int64_t n = t->size();
  switch (init.kind) {
    case Initializer::kGlorotUniform:
      GlorotUniform(seed, fan_in, fan_out, out, n);
      return;
    case Initializer::kUniform: {
      class SplitMix64 rng(seed);  // the class, not random.h's function
      for (int64_t i = 0; i < n; ++i) {
        out[i] = static_cast<float>((2.0 * rng.NextUnit() - 1.0) * init.scale);
      }
      return;
    }
    case Initializer::kTruncatedNormal: {
      // Draws beyond two standard deviations are drawn again (as Keras'
      // TruncatedNormal and BERT's initializer do).
      Rng rng(seed);
      for (int64_t i = 0; i < n; ++i) {
        double z;
        do {
          z = rng.NormalDouble();
        } while (std::fabs(z) > 2.0);
        out[i] = static_cast<float>(z * init.scale);
      }
      return;
    }
    case Initializer::kZeros:
      t->SetZero();
      return;
    case Initializer::kOnes:
      for (int64_t i = 0; i < n; ++i) out[i] = 1.0f;
      return;
  }
}

void MakeParam(const std::string& name, const Shape& shape, Param* p) {
  p->name = name;
  p->value = Tensor(shape);
  p->grad = Tensor(shape);
}

absl::Status ReadConvPadding(const spec_reader::Reader& r, ConvPadding* out) {
  if (!r.Has("padding")) return absl::OkStatus();
  const spec_reader::Json& v = r.Get("padding");
  if (v.is_string()) {
    return r.Enum("padding", "padding", Paddings(), &out->mode);
  }
  const std::string path = r.At("padding");
  const std::string want =
      "must be \"valid\", \"same\", or pixels on each side: N or [H, W] "
      "(N >= 0)";
  int64_t h = 0, w = 0;
  if (v.is_number_integer() || v.is_number_unsigned()) {
    RETURN_IF_ERROR(spec_reader::IntValue(v, path, 0, 1 << 20, &h));
    w = h;
  } else if (v.is_array() && v.size() == 2 &&
             v[0].is_number_integer() && v[1].is_number_integer()) {
    RETURN_IF_ERROR(spec_reader::IntValue(v[0], path + "[0]", 0, 1 << 20, &h));
    RETURN_IF_ERROR(spec_reader::IntValue(v[1], path + "[1]", 0, 1 << 20, &w));
  } else {
    return spec_reader::Bad(path,
                            absl::StrCat(want, ", got ", spec_reader::Got(v)));
  }
  out->mode = Padding::kExplicit;
  out->h = h;
  out->w = w;
  return absl::OkStatus();
}

spec_reader::Json ConvPaddingToJson(const ConvPadding& p) {
  if (p.mode == Padding::kExplicit) return spec_reader::Json({p.h, p.w});
  return spec_reader::NameOf(Paddings(), p.mode);
}

Conv2DGeometry ConvGeometry(const Shape& in, int64_t n, int64_t kh, int64_t kw,
                            int64_t filters, int64_t stride_h, int64_t stride_w,
                            const ConvPadding& padding, int64_t dil_h,
                            int64_t dil_w) {
  if (padding.mode != Padding::kExplicit) {
    return Conv2DGeometry::Make(n, in[0], in[1], in[2], kh, kw, filters,
                                stride_h, stride_w,
                                padding.mode == Padding::kSame, dil_h, dil_w);
  }
  // Valid over the padded input, which starts `h` rows and `w` columns
  // before the real one.
  Conv2DGeometry g = Conv2DGeometry::Make(
      n, in[0] + 2 * padding.h, in[1] + 2 * padding.w, in[2], kh, kw, filters,
      stride_h, stride_w, false, dil_h, dil_w);
  g.in_h = in[0];
  g.in_w = in[1];
  g.pad_top = padding.h;
  g.pad_left = padding.w;
  return g;
}

absl::Status CheckKernelFits(const LayerBuildContext& ctx, int64_t kernel_h,
                             int64_t kernel_w, const ConvPadding& padding) {
  const Shape& in = ctx.inputs[0];
  if (padding.mode == Padding::kSame ||
      (kernel_h <= in[0] + 2 * padding.h &&
       kernel_w <= in[1] + 2 * padding.w)) {
    return absl::OkStatus();
  }
  if (padding.mode == Padding::kExplicit) {
    return ctx.Error(absl::StrFormat(
        "kernel_size [%d, %d] is larger than its input %s with padding "
        "[%d, %d]",
        kernel_h, kernel_w, ShapeToString(in), padding.h, padding.w));
  }
  return ctx.Error(absl::StrFormat(
      "kernel_size [%d, %d] is larger than its input %s with padding "
      "\"valid\"; use padding \"same\" or a smaller kernel",
      kernel_h, kernel_w, ShapeToString(in)));
}

absl::Status CheckImageInput(const LayerBuildContext& ctx) {
  const Shape& in = ctx.inputs[0];
  if (in.size() == 3) return absl::OkStatus();
  return ctx.Error(
      absl::StrCat("expects an image input [height, width, channels], got ",
                   ShapeToString(in),
                   ctx.input_names[0] == "input"
                       ? "; set model.input_shape to [height, width, channels]"
                       : "; image layers must come before flatten and dense"));
}

}  // namespace lockstep
