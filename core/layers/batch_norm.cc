// batch_norm: its fields, parameters and CPU passes (the kernels are
// kernels/cpu/batch_norm).
#include "core/layers/batch_norm.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/layers/common.h"
#include "core/layers/registry.h"
#include "core/status_macros.h"
#include "kernels/cpu/batch_norm.h"

namespace lockstep {
namespace {

using spec_reader::Json;
using spec_reader::Reader;

absl::Status ReadBatchNorm(const Reader& r, BatchNormConfig* c) {
  RETURN_IF_ERROR(
      r.Number("momentum", spec_reader::kUnitClosed, &c->momentum));
  RETURN_IF_ERROR(r.Number("epsilon", spec_reader::kPositive, &c->epsilon));
  return r.Enum("activation", "activation", Activations(), &c->activation);
}

Json BatchNormToJson(const BatchNormConfig& c) {
  Json j;
  j["momentum"] = c.momentum;
  j["epsilon"] = c.epsilon;
  j["activation"] = spec_reader::NameOf(Activations(), c.activation);
  return j;
}

absl::StatusOr<std::unique_ptr<Layer>> CreateBatchNorm(
    const BatchNormConfig& c, const LayerBuildContext& ctx) {
  const Shape& in = ctx.inputs[0];
  if (in.empty() || in.back() == 0) {
    return ctx.Error(absl::StrCat("needs an input with a channel axis (its "
                                  "last), got ",
                                  ShapeToString(in)));
  }
  if (c.activation == Activation::kGelu ||
      c.activation == Activation::kSoftmax) {
    return ctx.Error(
        absl::StrCat("activation \"",
                     spec_reader::NameOf(Activations(), c.activation),
                     "\" is not for batch_norm"));
  }
  BatchNormNames names;
  names.gamma = ctx.ParamName("gamma", "weight");
  names.beta = ctx.ParamName("beta", "bias");
  names.mean = ctx.ParamName("moving_mean", "running_mean");
  names.var = ctx.ParamName("moving_variance", "running_var");
  return std::unique_ptr<Layer>(
      std::make_unique<BatchNormLayer>(c, ctx.name, in, names));
}

LOCKSTEP_REGISTER_LAYER(batch_norm,
                        MakeLayerType<BatchNormConfig>(
                            "batch_norm", "batch_normalization",
                            {"momentum", "epsilon", "activation"}, 1, 1, &ReadBatchNorm,
                            &BatchNormToJson, &CreateBatchNorm));

}  // namespace

BatchNormLayer::BatchNormLayer(const BatchNormConfig& config,
                               const std::string& name, const Shape& input,
                               const BatchNormNames& names)
    : Layer("batch_norm", name, {input}, input),
      epsilon_(static_cast<float>(config.epsilon)),
      act_(ToActivationKind(config.activation)) {
  const int64_t c = input.back();
  MakeParam(names.gamma, {c}, &gamma_);
  MakeParam(names.beta, {c}, &beta_);
  MakeParam(names.mean, {c}, &mean_);
  MakeParam(names.var, {c}, &var_);
  for (float& g : gamma_.value.values()) g = 1.0f;
  for (float& v : var_.value.values()) v = 1.0f;
  for (Param* p : {&mean_, &var_}) {
    p->update = ParamUpdate::kMovingAverage;
    p->momentum = static_cast<float>(config.momentum);
  }
  batch_mean_.resize(c);
  batch_var_.resize(c);
  rstd_.resize(c);
}

void BatchNormLayer::Forward(const LayerIO& io, const PassContext& ctx) {
  const int64_t rows = Rows(io.n), c = channels();
  if (rows == 0) return;
  const float* mean = io.w[2];
  const float* var = io.w[3];
  if (ctx.training) {
    BatchNormStatistics(rows, c, io.x[0], batch_mean_.data(),
                        batch_var_.data(), &partials_);
    mean = batch_mean_.data();
    var = batch_var_.data();
  }
  for (int64_t k = 0; k < c; ++k) {
    rstd_[k] = 1.0f / std::sqrt(var[k] + epsilon_);
  }
  BatchNormForward(rows, c, io.x[0], mean, rstd_.data(), io.w[0], io.w[1],
                   io.y);
  BiasActivationForward(rows, c, nullptr, act_, io.y);
}

void BatchNormLayer::Backward(const LayerIO& io, const PassContext& ctx) {
  const int64_t rows = Rows(io.n), c = channels();
  if (rows == 0) return;
  ActivationBackward(rows, c, act_, io.y, io.dy);
  const float* mean = ctx.training ? batch_mean_.data() : io.w[2];
  BatchNormBackward(rows, c, io.x[0], io.dy, mean, rstd_.data(), io.w[0],
                    ctx.training, io.dw[0], io.dw[1], io.dx[0], &partials_);
  if (!ctx.training) return;
  // The statistics' "gradients": this replica's batch mean and unbiased
  // variance, weighted by its samples (the step divides by the global
  // batch's).
  const float samples = static_cast<float>(io.n);
  const double bessel =
      rows > 1 ? static_cast<double>(rows) / static_cast<double>(rows - 1)
               : 1.0;
  for (int64_t k = 0; k < c; ++k) {
    io.dw[2][k] += samples * batch_mean_[k];
    io.dw[3][k] += static_cast<float>(samples * (batch_var_[k] * bessel));
  }
}

}  // namespace lockstep
