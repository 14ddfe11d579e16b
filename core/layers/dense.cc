// dense: one GEMM forward (accumulating onto the bias), two backward (the
// weight gradient, the input gradient), in either weight layout.
#include "core/layers/dense.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/layers/registry.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/gemm.h"

namespace lockstep {
namespace {

using spec_reader::Json;
using spec_reader::Reader;

absl::Status ReadDense(const Reader& r, DenseConfig* c) {
  RETURN_IF_ERROR(r.Require("units", "a dense layer"));
  RETURN_IF_ERROR(r.Int("units", 1, &c->units));
  RETURN_IF_ERROR(
      r.Enum("activation", "activation", Activations(), &c->activation));
  RETURN_IF_ERROR(r.Bool("use_bias", &c->use_bias));
  RETURN_IF_ERROR(
      ReadInitializer(r, "kernel_initializer", &c->kernel_initializer));
  RETURN_IF_ERROR(r.String("tied_to", &c->tied_to));
  if (r.Has("tied_to") && c->tied_to.empty()) {
    return spec_reader::Bad(r.At("tied_to"), "must name an embedding layer");
  }
  return absl::OkStatus();
}

Json DenseToJson(const DenseConfig& c) {
  Json j;
  j["units"] = c.units;
  j["activation"] = spec_reader::NameOf(Activations(), c.activation);
  j["use_bias"] = c.use_bias;
  // Written only when set, so the canonical form of jobs from before these
  // fields existed is unchanged.
  if (!(c.kernel_initializer == Initializer())) {
    j["kernel_initializer"] = InitializerToJson(c.kernel_initializer);
  }
  if (!c.tied_to.empty()) j["tied_to"] = c.tied_to;
  return j;
}

absl::StatusOr<std::unique_ptr<Layer>> CreateDense(
    const DenseConfig& c, const LayerBuildContext& ctx) {
  const Shape& in = ctx.inputs[0];
  if (in.empty()) return ctx.Error("expects an input with at least one axis");
  Param* tied = nullptr;
  if (!c.tied_to.empty()) {
    Layer* other = ctx.find_layer ? ctx.find_layer(c.tied_to) : nullptr;
    std::vector<Param*> p =
        other != nullptr ? other->params() : std::vector<Param*>();
    if (other == nullptr || other->type() != "embedding" || p.size() != 1) {
      return ctx.Error(absl::StrCat("tied_to: \"", c.tied_to,
                                    "\" is not an embedding layer before "
                                    "this one"));
    }
    tied = p[0];
    const Shape want = {c.units, in.back()};
    if (tied->value.shape() != want) {
      return ctx.Error(absl::StrCat(
          "tied_to: the table of \"", c.tied_to, "\" is ",
          ShapeToString(tied->value.shape()), " but this layer needs ",
          ShapeToString(want), " (units x the input's last axis)"));
    }
  }
  return std::unique_ptr<Layer>(std::make_unique<DenseLayer>(
      c, ctx.name, in, tied, ctx.naming, ctx.ParamName("kernel", "weight"),
      ctx.ParamName("bias", "bias"), ctx.init_seed));
}

LOCKSTEP_REGISTER_LAYER(
    dense,
    MakeLayerType<DenseConfig>("dense", "dense",
                               {"units", "activation", "use_bias",
                                "kernel_initializer", "tied_to"},
                               1, 1, &ReadDense, &DenseToJson, &CreateDense));

}  // namespace

DenseLayer::DenseLayer(const DenseConfig& config, const std::string& name,
                       const Shape& input_shape, Param* tied,
                       ParamNaming naming, std::string kernel_name,
                       std::string bias_name, uint64_t seed)
    : Layer("dense", name, {input_shape},
            [&] {
              Shape out = input_shape;
              out.back() = config.units;
              return out;
            }()),
      config_(config),
      in_(input_shape.back()),
      out_in_(tied != nullptr || naming == ParamNaming::kTorch),
      kernel_(tied != nullptr ? tied : &own_kernel_) {
  if (tied == nullptr) {
    MakeParam(kernel_name,
              out_in_ ? Shape{config.units, in_} : Shape{in_, config.units},
              &own_kernel_);
    Initialize(config.kernel_initializer, seed, in_, config.units,
               &own_kernel_.value);
  }
  if (config.use_bias) MakeParam(bias_name, {config.units}, &bias_);
}

std::vector<Param*> DenseLayer::params() {
  std::vector<Param*> p = {kernel_};
  if (config_.use_bias) p.push_back(&bias_);
  return p;
}

ActivationKind DenseLayer::Act(const PassContext& ctx) const {
  if ((config_.activation == Activation::kSoftmax ||
       config_.activation == Activation::kSigmoid) &&
      ctx.skip_output_activation) {
    return ActivationKind::kLinear;
  }
  return ToActivationKind(config_.activation);
}

void DenseLayer::Forward(const LayerIO& io, const PassContext& ctx) {
  const int64_t rows = Rows(io.n), units = config_.units;
  float* y = io.y;
  // The bias goes in first and the GEMM accumulates onto it (beta = 1):
  // one pass over y fewer than zeroing it and adding the bias after.
  float beta = 0.0f;
  if (config_.use_bias) {
    const float* b = io.w[1];
    for (int64_t r = 0; r < rows; ++r) std::copy(b, b + units, y + r * units);
    beta = 1.0f;
  }
  Gemm(ctx.precision, false, out_in_, rows, units, in_, 1.0f, io.x[0], io.w[0],
       beta, y);
  if (gelu()) {
    pre_.resize(rows * units);
    std::copy(y, y + rows * units, pre_.begin());
    GeluForward(rows * units, y, y);
  } else {
    BiasActivationForward(rows, units, nullptr, Act(ctx), y);
  }
}

void DenseLayer::Backward(const LayerIO& io, const PassContext& ctx) {
  const int64_t rows = Rows(io.n), units = config_.units;
  float* dz = io.dy;
  // dz, and db = column sums of dz in the same pass.
  if (gelu()) {
    GeluBackward(rows * units, pre_.data(), dz, dz);
    if (config_.use_bias) BiasGrad(rows, units, dz, io.dw[1]);
  } else {
    ActivationBackwardBiasGrad(rows, units, Act(ctx), io.y, dz,
                               config_.use_bias ? io.dw[1] : nullptr);
  }
  // The weight gradient accumulates (beta = 1): a tied table gets this and
  // the embedding's contribution.
  if (out_in_) {
    Gemm(ctx.precision, true, false, units, in_, rows, 1.0f, dz, io.x[0], 1.0f,
         io.dw[0]);
  } else {
    Gemm(ctx.precision, true, false, in_, units, rows, 1.0f, io.x[0], dz, 1.0f,
         io.dw[0]);
  }
  if (io.dx[0] != nullptr) {
    Gemm(ctx.precision, false, !out_in_, rows, in_, units, 1.0f, dz, io.w[0],
         0.0f, io.dx[0]);
  }
}

}  // namespace lockstep
