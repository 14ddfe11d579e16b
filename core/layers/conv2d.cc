// conv2d over the im2col kernels; the patch matrix built in Forward is kept
// in the layer's workspace and reused by Backward.
#include "core/layers/conv2d.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "core/layers/registry.h"
#include "core/param_init.h"

namespace lockstep {
namespace {

using spec_reader::Json;
using spec_reader::Reader;

absl::Status ReadConv2D(const Reader& r, Conv2DConfig* c) {
  RETURN_IF_ERROR(r.Require("filters", "a conv2d layer"));
  RETURN_IF_ERROR(r.Int("filters", 1, &c->filters));
  RETURN_IF_ERROR(r.Require("kernel_size", "a conv2d layer"));
  RETURN_IF_ERROR(r.Pair("kernel_size", &c->kernel_h, &c->kernel_w));
  RETURN_IF_ERROR(r.Pair("strides", &c->stride_h, &c->stride_w));
  RETURN_IF_ERROR(ReadConvPadding(r, &c->padding));
  RETURN_IF_ERROR(
      r.Enum("activation", "activation", Activations(), &c->activation));
  RETURN_IF_ERROR(r.Bool("use_bias", &c->use_bias));
  RETURN_IF_ERROR(r.Int("groups", 1, &c->groups));
  RETURN_IF_ERROR(r.Pair("dilation_rate", &c->dil_h, &c->dil_w));
  return absl::OkStatus();
}

Json Conv2DToJson(const Conv2DConfig& c) {
  Json j;
  j["filters"] = c.filters;
  j["kernel_size"] = {c.kernel_h, c.kernel_w};
  j["strides"] = {c.stride_h, c.stride_w};
  j["padding"] = ConvPaddingToJson(c.padding);
  j["activation"] = spec_reader::NameOf(Activations(), c.activation);
  j["use_bias"] = c.use_bias;
  j["groups"] = c.groups;
  // Written only when set: the canonical form of an undilated conv (and
  // so checkpoints' job JSON) stays as it was.
  if (c.dil_h != 1 || c.dil_w != 1) j["dilation_rate"] = {c.dil_h, c.dil_w};
  return j;
}

absl::StatusOr<std::unique_ptr<Layer>> CreateConv2D(
    const Conv2DConfig& c, const LayerBuildContext& ctx) {
  const Shape& in = ctx.inputs[0];
  RETURN_IF_ERROR(CheckImageInput(ctx));
  if (c.activation == Activation::kGelu) {
    return ctx.Error("activation \"gelu\" is for dense layers");
  }
  // A dilated kernel spans dil * (k - 1) + 1 cells.
  RETURN_IF_ERROR(CheckKernelFits(ctx, c.dil_h * (c.kernel_h - 1) + 1,
                                  c.dil_w * (c.kernel_w - 1) + 1, c.padding));
  if (in[2] % c.groups != 0 || c.filters % c.groups != 0) {
    return ctx.Error(absl::StrFormat(
        "groups %d must divide both the input's channels (%d) and filters "
        "(%d)",
        c.groups, in[2], c.filters));
  }
  return std::unique_ptr<Layer>(std::make_unique<Conv2DLayer>(
      c, ctx.name, in, ctx.ParamName("kernel", "weight"),
      ctx.ParamName("bias", "bias"), ctx.init_seed,
      ctx.naming == ParamNaming::kTorch));
}

LOCKSTEP_REGISTER_LAYER(
    conv2d, MakeLayerType<Conv2DConfig>("conv2d", "conv2d",
                                        {"filters", "kernel_size", "strides",
                                         "padding", "activation", "use_bias",
                                         "groups", "dilation_rate"},
                                        1, 1, &ReadConv2D, &Conv2DToJson,
                                        &CreateConv2D));

}  // namespace

Conv2DLayer::Conv2DLayer(const Conv2DConfig& config, const std::string& name,
                         const Shape& input_shape, std::string kernel_name,
                         std::string bias_name, uint64_t seed,
                         bool torch_layout)
    : Layer("conv2d", name, {input_shape},
            {ConvGeometry(input_shape, 0, config.kernel_h, config.kernel_w,
                          config.filters, config.stride_h, config.stride_w,
                          config.padding, config.dil_h, config.dil_w)
                 .out_h,
             ConvGeometry(input_shape, 0, config.kernel_h, config.kernel_w,
                          config.filters, config.stride_h, config.stride_w,
                          config.padding, config.dil_h, config.dil_w)
                 .out_w,
             config.filters}),
      config_(config),
      layout_(torch_layout,
              {config.kernel_h, config.kernel_w, input_shape[2] / config.groups,
               config.filters},
              config.filters, input_shape[2] / config.groups) {
  const int64_t area = config.kernel_h * config.kernel_w;
  MakeParam(kernel_name, layout_.param_shape(), &kernel_);
  // Drawn in Keras' layout either way: the same seed, the same model.
  // Keras' fans are those of the kernel's shape [KH, KW, C / groups, F].
  std::vector<float> keras(kernel_.value.size());
  GlorotUniform(seed, area * input_shape[2] / config.groups,
                area * config.filters, keras.data(), keras.size());
  layout_.FromKeras(keras.data(), kernel_.value.data());
  if (config_.use_bias) MakeParam(bias_name, {config.filters}, &bias_);
}

std::vector<Param*> Conv2DLayer::params() {
  if (config_.use_bias) return {&kernel_, &bias_};
  return {&kernel_};
}

ActivationKind Conv2DLayer::Act(const PassContext& ctx) const {
  if ((config_.activation == Activation::kSoftmax ||
       config_.activation == Activation::kSigmoid) &&
      ctx.skip_output_activation) {
    return ActivationKind::kLinear;
  }
  return ToActivationKind(config_.activation);
}

Conv2DGeometry Conv2DLayer::Geometry(int64_t n) const {
  return ConvGeometry(input_shape(), n, config_.kernel_h, config_.kernel_w,
                      config_.filters, config_.stride_h, config_.stride_w,
                      config_.padding, config_.dil_h, config_.dil_w);
}

Conv2DGeometry Conv2DLayer::GroupGeometry(int64_t n) const {
  Conv2DGeometry g = Geometry(n);
  g.in_c /= config_.groups;
  g.filters /= config_.groups;
  return g;
}

namespace {

// dst[r, 0:width) = src[r, offset:offset + width) for rows of `stride`
// floats (a group's channels out of all of them), and back.
void GatherColumns(int64_t rows, int64_t stride, int64_t offset,
                   int64_t width, const float* src, float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    std::copy(src + r * stride + offset, src + r * stride + offset + width,
              dst + r * width);
  }
}
void ScatterColumns(int64_t rows, int64_t stride, int64_t offset,
                    int64_t width, const float* src, float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    std::copy(src + r * width, src + (r + 1) * width,
              dst + r * stride + offset);
  }
}

}  // namespace

void Conv2DLayer::Forward(const LayerIO& io, const PassContext& ctx) {
  if (config_.groups == 1) {
    Conv2DGeometry g = Geometry(io.n);
    g.precision = ctx.precision;
    Conv2DForward(g, io.x[0], layout_.KerasKernel(io.w[0]),
                  config_.use_bias ? io.w[1] : nullptr, Act(ctx), io.y, &ws_);
    return;
  }
  // Each group's channels through the same kernels, then bias and
  // activation over all filters.
  Conv2DGeometry g = GroupGeometry(io.n);
  g.precision = ctx.precision;
  const float* kernel = layout_.KerasKernel(io.w[0]);
  const int64_t pixels = g.batch * g.in_h * g.in_w, taps_c = g.patch_size();
  const int64_t c_all = g.in_c * config_.groups, f_all = config_.filters;
  group_ws_.resize(config_.groups);
  x_g_.resize(pixels * g.in_c);
  k_g_.resize(taps_c * g.filters);
  y_g_.resize(g.rows() * g.filters);
  for (int64_t grp = 0; grp < config_.groups; ++grp) {
    GatherColumns(pixels, c_all, grp * g.in_c, g.in_c, io.x[0], x_g_.data());
    GatherColumns(taps_c, f_all, grp * g.filters, g.filters, kernel,
                  k_g_.data());
    Conv2DForward(g, x_g_.data(), k_g_.data(), nullptr, ActivationKind::kLinear,
                  y_g_.data(), &group_ws_[grp]);
    ScatterColumns(g.rows(), f_all, grp * g.filters, g.filters, y_g_.data(),
                   io.y);
  }
  BiasActivationForward(g.rows(), f_all, config_.use_bias ? io.w[1] : nullptr,
                        Act(ctx), io.y);
}

void Conv2DLayer::Backward(const LayerIO& io, const PassContext& ctx) {
  if (config_.groups == 1) {
    Conv2DGeometry g = Geometry(io.n);
    g.precision = ctx.precision;
    ActivationBackwardBiasGrad(g.rows(), g.filters, Act(ctx), io.y, io.dy,
                               config_.use_bias ? io.dw[1] : nullptr);
    Conv2DBackward(g, io.x[0], layout_.KerasKernel(io.w[0]), io.dy,
                   layout_.KerasGrad(io.dw[0]), nullptr, io.dx[0], &ws_);
    layout_.FinishGrad(io.dw[0]);
    return;
  }
  Conv2DGeometry g = GroupGeometry(io.n);
  g.precision = ctx.precision;
  const int64_t pixels = g.batch * g.in_h * g.in_w, taps_c = g.patch_size();
  const int64_t c_all = g.in_c * config_.groups, f_all = config_.filters;
  ActivationBackwardBiasGrad(g.rows(), f_all, Act(ctx), io.y, io.dy,
                             config_.use_bias ? io.dw[1] : nullptr);
  const float* kernel = layout_.KerasKernel(io.w[0]);
  float* dkernel = layout_.KerasGrad(io.dw[0]);
  x_g_.resize(pixels * g.in_c);
  k_g_.resize(taps_c * g.filters);
  dy_g_.resize(g.rows() * g.filters);
  dk_g_.resize(taps_c * g.filters);
  if (io.dx[0] != nullptr) dx_g_.resize(pixels * g.in_c);
  for (int64_t grp = 0; grp < config_.groups; ++grp) {
    GatherColumns(pixels, c_all, grp * g.in_c, g.in_c, io.x[0], x_g_.data());
    GatherColumns(taps_c, f_all, grp * g.filters, g.filters, kernel,
                  k_g_.data());
    GatherColumns(g.rows(), f_all, grp * g.filters, g.filters, io.dy,
                  dy_g_.data());
    Conv2DBackward(g, x_g_.data(), k_g_.data(), dy_g_.data(), dk_g_.data(),
                   nullptr, io.dx[0] != nullptr ? dx_g_.data() : nullptr,
                   &group_ws_[grp]);
    ScatterColumns(taps_c, f_all, grp * g.filters, g.filters, dk_g_.data(),
                   dkernel);
    if (io.dx[0] != nullptr) {
      ScatterColumns(pixels, c_all, grp * g.in_c, g.in_c, dx_g_.data(),
                     io.dx[0]);
    }
  }
  layout_.FinishGrad(io.dw[0]);
}

}  // namespace lockstep
