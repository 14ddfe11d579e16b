// batch_norm: its fields, parameters and CPU passes (the kernels are
// kernels/cpu/batch_norm).
#include "core/layers/batch_norm.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/layers/common.h"
#include "core/layers/registry.h"
#include "kernels/cpu/batch_norm.h"

namespace lockstep {
namespace {

using spec_reader::Json;
using spec_reader::Reader;

absl::Status ReadBatchNorm(const Reader& r, BatchNormConfig* c) {
  RETURN_IF_ERROR(
      r.Number("momentum", spec_reader::kUnitClosed, &c->momentum));
  RETURN_IF_ERROR(r.Number("epsilon", spec_reader::kPositive, &c->epsilon));
  RETURN_IF_ERROR(r.Bool("sync", &c->sync));
  return r.Enum("activation", "activation", Activations(), &c->activation);
}

Json BatchNormToJson(const BatchNormConfig& c) {
  Json j;
  j["momentum"] = c.momentum;
  j["epsilon"] = c.epsilon;
  j["activation"] = spec_reader::NameOf(Activations(), c.activation);
  if (c.sync) j["sync"] = true;
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
                            {"momentum", "epsilon", "activation", "sync"}, 1, 1, &ReadBatchNorm,
                            &BatchNormToJson, &CreateBatchNorm));

}  // namespace

BatchNormLayer::BatchNormLayer(const BatchNormConfig& config,
                               const std::string& name, const Shape& input,
                               const BatchNormNames& names)
    : Layer("batch_norm", name, {input}, input),
      epsilon_(static_cast<float>(config.epsilon)),
      act_(ToActivationKind(config.activation)),
      sync_(config.sync) {
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

bool SyncMoments(int64_t channels, const float* wire, const float* shift,
                 float epsilon, float* mean, float* var, double* rows) {
  const int64_t c = channels;
  *rows = wire[2 * c];
  const double inv = *rows > 0 ? 1.0 / *rows : 0.0;
  // var = E[(x - shift)^2] - d^2 with d = mean - shift loses about
  // d^2 / (var + epsilon) float roundings: where that passes 16 for a
  // channel (the running mean far from the batch's, early in training), a
  // second sum takes the squared deviations from the mean itself, exact as
  // the local kernel. Every replica sees the same sums, so all choose
  // alike.
  bool exact = false;
  for (int64_t k = 0; k < c; ++k) {
    const double d = wire[k] * inv;
    const double v = std::max(0.0, wire[c + k] * inv - d * d);
    mean[k] = static_cast<float>(shift[k] + d);
    var[k] = static_cast<float>(v);
    if (d * d > 16.0 * (v + epsilon)) exact = true;
  }
  return exact;
}

void BatchNormLayer::SyncStatistics(const LayerIO& io,
                                    const PassContext& ctx) {
  const int64_t rows = Rows(io.n), c = channels();
  // The collective keeps any error and fails the step (PassCollective), so
  // its status is not needed here.
  // One sum: the rows and both moments around the running mean, which
  // every replica holds identically and which is near the batch mean once
  // training has settled.
  const float* shift = io.w[2];
  wire_.resize(2 * c + 1);
  sums_.resize(2 * c);
  BatchNormShiftedSums(rows, c, rows > 0 ? io.x[0] : nullptr, shift,
                       sums_.data(), &partials_);
  for (int64_t k = 0; k < 2 * c; ++k) wire_[k] = static_cast<float>(sums_[k]);
  wire_[2 * c] = static_cast<float>(rows);
  ctx.collective->Sum(ctx.collective_key, wire_.data(), 2 * c + 1)
      .IgnoreError();
  const bool exact =
      SyncMoments(c, wire_.data(), shift, epsilon_, batch_mean_.data(),
                  batch_var_.data(), &stat_rows_);
  if (!exact) return;
  BatchNormSquaredDeviations(rows, c, rows > 0 ? io.x[0] : nullptr,
                             batch_mean_.data(), sums_.data(), &partials_);
  for (int64_t k = 0; k < c; ++k) wire_[k] = static_cast<float>(sums_[k]);
  ctx.collective->Sum(ctx.collective_key + 1, wire_.data(), c).IgnoreError();
  const double inv = stat_rows_ > 0 ? 1.0 / stat_rows_ : 0.0;
  for (int64_t k = 0; k < c; ++k) {
    batch_var_[k] = static_cast<float>(wire_[k] * inv);
  }
}

void BatchNormLayer::Forward(const LayerIO& io, const PassContext& ctx) {
  const int64_t rows = Rows(io.n), c = channels();
  const bool sync = sync_ && ctx.training && ctx.collective != nullptr;
  if (sync) {
    SyncStatistics(io, ctx);  // with no rows too: every replica takes part
  } else {
    stat_rows_ = static_cast<double>(rows);
  }
  if (rows == 0) return;
  const float* mean = io.w[2];
  const float* var = io.w[3];
  if (ctx.training) {
    if (!sync) {
      BatchNormStatistics(rows, c, io.x[0], batch_mean_.data(),
                          batch_var_.data(), &partials_);
    }
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
  if (sync_ && ctx.training && ctx.collective != nullptr) {
    // sum(dy) and sum(dy * (x - mean)) over every replica's rows; this
    // replica's own go to dbeta and dgamma (the gradient all-reduce sums
    // those).
    if (rows > 0) ActivationBackward(rows, c, act_, io.y, io.dy);
    sums_.resize(2 * c);
    wire_.resize(2 * c);
    BatchNormBackwardSums(rows, c, rows > 0 ? io.x[0] : nullptr, io.dy,
                          batch_mean_.data(), sums_.data(), &partials_);
    for (int64_t k = 0; k < 2 * c; ++k) wire_[k] = static_cast<float>(sums_[k]);
    if (rows > 0) {
      for (int64_t k = 0; k < c; ++k) {
        io.dw[0][k] += static_cast<float>(sums_[c + k] * rstd_[k]);
        io.dw[1][k] += wire_[k];
      }
    }
    ctx.collective->Sum(ctx.collective_key + 2, wire_.data(), 2 * c)
        .IgnoreError();
    if (rows == 0) return;
    for (int64_t k = 0; k < 2 * c; ++k) sums_[k] = wire_[k];
    if (io.dx[0] != nullptr) {
      BatchNormBackwardInput(rows, c, io.x[0], io.dy, batch_mean_.data(),
                             rstd_.data(), io.w[0], sums_.data(), stat_rows_,
                             io.dx[0]);
    }
    AddStatisticsContributions(io);
    return;
  }
  if (rows == 0) return;
  ActivationBackward(rows, c, act_, io.y, io.dy);
  const float* mean = ctx.training ? batch_mean_.data() : io.w[2];
  BatchNormBackward(rows, c, io.x[0], io.dy, mean, rstd_.data(), io.w[0],
                    ctx.training, io.dw[0], io.dw[1], io.dx[0], &partials_);
  if (ctx.training) AddStatisticsContributions(io);
}

void BatchNormLayer::AddStatisticsContributions(const LayerIO& io) {
  // The statistics' "gradients": the batch mean and unbiased variance it
  // normalized with (this replica's, or the global batch's with sync),
  // weighted by this replica's samples (the step divides by the global
  // batch's).
  const int64_t c = channels();
  const float samples = static_cast<float>(io.n);
  const double bessel =
      stat_rows_ > 1 ? stat_rows_ / (stat_rows_ - 1) : 1.0;
  for (int64_t k = 0; k < c; ++k) {
    io.dw[2][k] += samples * batch_mean_[k];
    io.dw[3][k] += static_cast<float>(samples * (batch_var_[k] * bessel));
  }
}

}  // namespace lockstep
