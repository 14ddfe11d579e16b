// Dense: one GEMM forward (accumulating onto the bias), two backward (kernel
// grad, input grad).
#include <algorithm>

#include "core/layers.h"
#include "core/param_init.h"
#include "kernels/cpu/gemm.h"

namespace lockstep {

ActivationKind ToActivationKind(Activation a) {
  switch (a) {
    case Activation::kRelu:
      return ActivationKind::kRelu;
    case Activation::kTanh:
      return ActivationKind::kTanh;
    case Activation::kSigmoid:
      return ActivationKind::kSigmoid;
    case Activation::kSoftmax:
      return ActivationKind::kSoftmax;
    case Activation::kLinear:
      break;
  }
  return ActivationKind::kLinear;
}

DenseLayer::DenseLayer(const std::string& name, int64_t in, int64_t units,
                       Activation act, bool use_bias, uint64_t init_seed)
    : Layer(name, {in}, {units}),
      in_(in),
      units_(units),
      act_(act),
      use_bias_(use_bias) {
  kernel_.name = name + "/kernel";
  kernel_.value = Tensor({in, units});
  kernel_.grad = Tensor({in, units});
  GlorotUniform(init_seed, in, units, kernel_.value.data(),
                kernel_.value.size());
  if (use_bias_) {
    bias_.name = name + "/bias";
    bias_.value = Tensor({units});
    bias_.grad = Tensor({units});
  }
}

std::vector<Param*> DenseLayer::params() {
  if (use_bias_) return {&kernel_, &bias_};
  return {&kernel_};
}

ActivationKind DenseLayer::Act(const PassContext& ctx) const {
  if (act_ == Activation::kSoftmax && ctx.skip_softmax) {
    return ActivationKind::kLinear;
  }
  return ToActivationKind(act_);
}

void DenseLayer::Forward(int64_t n, const float* x, float* y,
                         const PassContext& ctx) {
  // The bias goes in first and the GEMM accumulates onto it (beta = 1):
  // one pass over y fewer than OpenBLAS zeroing it and a separate bias add.
  float beta = 0.0f;
  if (use_bias_) {
    const float* b = bias_.value.data();
    for (int64_t r = 0; r < n; ++r) std::copy(b, b + units_, y + r * units_);
    beta = 1.0f;
  }
  Gemm(false, false, n, units_, in_, 1.0f, x, kernel_.value.data(), beta, y);
  BiasActivationForward(n, units_, nullptr, Act(ctx), y);
}

void DenseLayer::Backward(int64_t n, const float* x, const float* y, float* dy,
                          float* dx, const PassContext& ctx) {
  // dz and db = column sums of dz in one pass; dW = x^T dz; dx = dz W^T.
  ActivationBackwardBiasGrad(n, units_, Act(ctx), y, dy,
                             use_bias_ ? bias_.grad.data() : nullptr);
  Gemm(true, false, in_, units_, n, 1.0f, x, dy, 0.0f, kernel_.grad.data());
  if (dx != nullptr) {
    Gemm(false, true, n, in_, units_, 1.0f, dy, kernel_.value.data(), 0.0f, dx);
  }
}

}  // namespace lockstep
