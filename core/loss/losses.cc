// The losses: sparse categorical cross-entropy (softmax over the classes,
// Keras' SparseCategoricalCrossentropy(from_logits=True)), mean squared
// error against one-hot targets or a regression label, and binary
// cross-entropy from one logit (Keras' BinaryCrossentropy(from_logits=
// True), torch's BCEWithLogitsLoss).
#include <cmath>

#include "absl/strings/str_format.h"
#include "core/loss/loss.h"
#include "kernels/cpu/bce.h"
#include "kernels/cpu/mse.h"
#include "kernels/cpu/softmax_xent.h"

namespace lockstep {
namespace {

Loss SparseCategoricalCrossentropy() {
  Loss l;
  l.name = "sparse_categorical_crossentropy";
  l.fused = FusedActivation::kSoftmax;
  l.compute = [](int64_t rows, int64_t outputs, const float* out,
                 const int32_t* labels, float scale, float* grad) {
    return SoftmaxCrossEntropy(rows, outputs, out, labels, scale, grad,
                               nullptr);
  };
  return l;
}

Loss Mse() {
  Loss l;
  l.name = "mse";
  l.compute = [](int64_t rows, int64_t outputs, const float* out,
                 const int32_t* labels, float scale, float* grad) {
    return MeanSquaredError(rows, outputs, out, labels, scale, grad);
  };
  // One output per class, or one regression output per sample.
  l.fits = [](const LossFit& f) {
    return f.model_outputs == f.classes ||
           (f.model_outputs == 1 && f.labels == 1);
  };
  return l;
}

Loss BinaryCrossentropy() {
  Loss l;
  l.name = "binary_crossentropy";
  l.fused = FusedActivation::kSigmoid;
  l.compute = [](int64_t rows, int64_t, const float* out, const int32_t* labels,
                 float scale, float* grad) {
    return BinaryCrossEntropy(rows, out, labels, scale, grad);
  };
  // One logit (or sigmoid probability) per sample, labels 0 and 1.
  l.check = [](const LossFit& f) {
    if (f.classes != 2 || f.labels != 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "loss: binary_crossentropy needs two classes (labels 0 and 1), "
          "one per sample; the data (%s) has %d label(s) of %d classes per "
          "sample",
          f.source, f.labels, f.classes));
    }
    if (f.model_outputs != 1 || f.model_labels != 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "model: binary_crossentropy reads one logit per sample (a last "
          "dense layer of 1 unit, linear or sigmoid), but the model outputs "
          "%s per sample",
          f.model_shape));
    }
    return absl::OkStatus();
  };
  l.fits = [](const LossFit&) { return true; };
  l.predicted_classes = [](int64_t) -> int64_t { return 2; };
  l.probabilities = [](const float* out, int64_t, double* prob) {
    prob[1] = 1.0 / (1.0 + std::exp(-static_cast<double>(out[0])));
    prob[0] = 1.0 - prob[1];
  };
  return l;
}

LOCKSTEP_REGISTER_LOSS(sparse_categorical_crossentropy,
                       SparseCategoricalCrossentropy());
LOCKSTEP_REGISTER_LOSS(mse, Mse());
LOCKSTEP_REGISTER_LOSS(binary_crossentropy, BinaryCrossentropy());

}  // namespace
}  // namespace lockstep
