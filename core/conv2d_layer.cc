// Conv2D over the im2col kernels; the patch matrix built in Forward is kept
// in the layer's workspace and reused by Backward.
#include "core/layers.h"
#include "core/param_init.h"

namespace lockstep {

Conv2DLayer::Conv2DLayer(const std::string& name, const Shape& input_shape,
                         const LayerSpec& spec, uint64_t init_seed)
    : Layer(name, input_shape,
            {ConvOutputSize(input_shape[0], spec.kernel_h, spec.stride_h,
                            spec.padding == Padding::kSame),
             ConvOutputSize(input_shape[1], spec.kernel_w, spec.stride_w,
                            spec.padding == Padding::kSame),
             spec.filters}),
      spec_(spec) {
  const int64_t c = input_shape[2];
  kernel_.name = name + "/kernel";
  kernel_.value = Tensor({spec.kernel_h, spec.kernel_w, c, spec.filters});
  kernel_.grad = Tensor(kernel_.value.shape());
  const int64_t area = spec.kernel_h * spec.kernel_w;
  GlorotUniform(init_seed, area * c, area * spec.filters, kernel_.value.data(),
                kernel_.value.size());
  if (spec_.use_bias) {
    bias_.name = name + "/bias";
    bias_.value = Tensor({spec.filters});
    bias_.grad = Tensor({spec.filters});
  }
}

std::vector<Param*> Conv2DLayer::params() {
  if (spec_.use_bias) return {&kernel_, &bias_};
  return {&kernel_};
}

ActivationKind Conv2DLayer::Act(const PassContext& ctx) const {
  if (spec_.activation == Activation::kSoftmax && ctx.skip_softmax) {
    return ActivationKind::kLinear;
  }
  return ToActivationKind(spec_.activation);
}

Conv2DGeometry Conv2DLayer::Geometry(int64_t n) const {
  const Shape& in = input_shape();
  return Conv2DGeometry::Make(n, in[0], in[1], in[2], spec_.kernel_h,
                              spec_.kernel_w, spec_.filters, spec_.stride_h,
                              spec_.stride_w, spec_.padding == Padding::kSame);
}

void Conv2DLayer::Forward(int64_t n, const float* x, float* y,
                          const PassContext& ctx) {
  const Conv2DGeometry g = Geometry(n);
  Conv2DForward(g, x, kernel_.value.data(),
                spec_.use_bias ? bias_.value.data() : nullptr, Act(ctx), y,
                &ws_);
}

void Conv2DLayer::Backward(int64_t n, const float* x, const float* y, float* dy,
                           float* dx, const PassContext& ctx) {
  const Conv2DGeometry g = Geometry(n);
  ActivationBackwardBiasGrad(g.rows(), g.filters, Act(ctx), y, dy,
                             spec_.use_bias ? bias_.grad.data() : nullptr);
  Conv2DBackward(g, x, kernel_.value.data(), dy, kernel_.grad.data(), nullptr,
                 dx, &ws_);
}

}  // namespace lockstep
