// depthwise_conv2d's fields and its CPU passes.
#include "core/layers/depthwise_conv2d.h"

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "core/layers/registry.h"
#include "core/param_init.h"
#include "kernels/cpu/depthwise.h"
#include "kernels/cpu/elementwise.h"

namespace lockstep {
namespace {

using spec_reader::Json;
using spec_reader::Reader;

absl::Status ReadDepthwise(const Reader& r, DepthwiseConv2DConfig* c) {
  RETURN_IF_ERROR(r.Require("kernel_size", "a depthwise_conv2d layer"));
  RETURN_IF_ERROR(r.Pair("kernel_size", &c->kernel_h, &c->kernel_w));
  RETURN_IF_ERROR(r.Pair("strides", &c->stride_h, &c->stride_w));
  RETURN_IF_ERROR(r.Int("depth_multiplier", 1, &c->depth_multiplier));
  RETURN_IF_ERROR(ReadConvPadding(r, &c->padding));
  RETURN_IF_ERROR(
      r.Enum("activation", "activation", Activations(), &c->activation));
  RETURN_IF_ERROR(r.Bool("use_bias", &c->use_bias));
  return absl::OkStatus();
}

Json DepthwiseToJson(const DepthwiseConv2DConfig& c) {
  Json j;
  j["kernel_size"] = {c.kernel_h, c.kernel_w};
  j["strides"] = {c.stride_h, c.stride_w};
  j["depth_multiplier"] = c.depth_multiplier;
  j["padding"] = ConvPaddingToJson(c.padding);
  j["activation"] = spec_reader::NameOf(Activations(), c.activation);
  j["use_bias"] = c.use_bias;
  return j;
}

absl::StatusOr<std::unique_ptr<Layer>> CreateDepthwise(
    const DepthwiseConv2DConfig& c, const LayerBuildContext& ctx) {
  const Shape& in = ctx.inputs[0];
  RETURN_IF_ERROR(CheckImageInput(ctx));
  if (c.activation == Activation::kGelu ||
      c.activation == Activation::kSoftmax) {
    return ctx.Error(absl::StrFormat(
        "activation \"%s\" is not for depthwise_conv2d",
        spec_reader::NameOf(Activations(), c.activation)));
  }
  RETURN_IF_ERROR(CheckKernelFits(ctx, c.kernel_h, c.kernel_w, c.padding));
  return std::unique_ptr<Layer>(std::make_unique<DepthwiseConv2DLayer>(
      c, ctx.name, in, ctx.ParamName("depthwise_kernel", "weight"),
      ctx.ParamName("bias", "bias"), ctx.init_seed,
      ctx.naming == ParamNaming::kTorch));
}

LOCKSTEP_REGISTER_LAYER(
    depthwise_conv2d,
    MakeLayerType<DepthwiseConv2DConfig>(
        "depthwise_conv2d", "depthwise_conv2d",
        {"kernel_size", "strides", "depth_multiplier", "padding",
         "activation", "use_bias"},
        1, 1, &ReadDepthwise, &DepthwiseToJson, &CreateDepthwise));

}  // namespace

DepthwiseConv2DLayer::DepthwiseConv2DLayer(
    const DepthwiseConv2DConfig& config, const std::string& name,
    const Shape& input_shape, std::string kernel_name, std::string bias_name,
    uint64_t seed, bool torch_layout)
    : Layer("depthwise_conv2d", name, {input_shape},
            {ConvGeometry(input_shape, 0, config.kernel_h, config.kernel_w, 1,
                          config.stride_h, config.stride_w, config.padding)
                 .out_h,
             ConvGeometry(input_shape, 0, config.kernel_h, config.kernel_w, 1,
                          config.stride_h, config.stride_w, config.padding)
                 .out_w,
             input_shape[2] * config.depth_multiplier}),
      config_(config),
      layout_(torch_layout,
              {config.kernel_h, config.kernel_w, input_shape[2],
               config.depth_multiplier},
              input_shape[2] * config.depth_multiplier, 1) {
  const int64_t c = input_shape[2], m = config.depth_multiplier;
  const int64_t area = config.kernel_h * config.kernel_w;
  MakeParam(kernel_name, layout_.param_shape(), &kernel_);
  // Keras' fans for a [KH, KW, C, M] kernel, drawn in Keras' layout either
  // way: the same seed, the same model.
  std::vector<float> keras(kernel_.value.size());
  GlorotUniform(seed, area * c, area * m, keras.data(), keras.size());
  layout_.FromKeras(keras.data(), kernel_.value.data());
  if (config_.use_bias) MakeParam(bias_name, {c * m}, &bias_);
}

std::vector<Param*> DepthwiseConv2DLayer::params() {
  if (config_.use_bias) return {&kernel_, &bias_};
  return {&kernel_};
}

Conv2DGeometry DepthwiseConv2DLayer::Geometry(int64_t n) const {
  return ConvGeometry(input_shape(), n, config_.kernel_h, config_.kernel_w,
                      input_shape()[2] * config_.depth_multiplier,
                      config_.stride_h, config_.stride_w, config_.padding);
}

const float* DepthwiseConv2DLayer::Rounded(const PassContext& ctx,
                                           const float* x, int64_t n,
                                           std::vector<float>& copy) const {
  if (ctx.precision != GemmPrecision::kBf16) return x;
  copy.resize(n);
  RoundToBf16(n, x, copy.data());
  return copy.data();
}

void DepthwiseConv2DLayer::Forward(const LayerIO& io, const PassContext& ctx) {
  const Conv2DGeometry g = Geometry(io.n);
  DepthwiseConv2DForward(
      g, Rounded(ctx, io.x[0], io.n * input_size(0), rounded_x_),
      Rounded(ctx, layout_.KerasKernel(io.w[0]), kernel_.value.size(),
              rounded_kernel_),
      config_.use_bias ? io.w[1] : nullptr, io.y);
  BiasActivationForward(g.rows(), g.filters, nullptr, Act(), io.y);
}

void DepthwiseConv2DLayer::Backward(const LayerIO& io, const PassContext& ctx) {
  const Conv2DGeometry g = Geometry(io.n);
  ActivationBackwardBiasGrad(g.rows(), g.filters, Act(), io.y, io.dy,
                             config_.use_bias ? io.dw[1] : nullptr);
  // bf16: the convolution's inputs rounded as a GEMM's are (dy in place:
  // the bias has its float32 gradient already).
  if (ctx.precision == GemmPrecision::kBf16) {
    RoundToBf16(g.rows() * g.filters, io.dy, io.dy);
  }
  DepthwiseConv2DBackward(
      g, Rounded(ctx, io.x[0], io.n * input_size(0), rounded_x_),
      Rounded(ctx, layout_.KerasKernel(io.w[0]), kernel_.value.size(),
              rounded_kernel_),
      io.dy, layout_.KerasGrad(io.dw[0]), io.dx[0], &partials_);
  layout_.FinishGrad(io.dw[0]);
}

}  // namespace lockstep
