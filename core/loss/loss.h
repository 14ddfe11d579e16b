// The losses a job's "loss" names, registered like layers (one entry each
// in losses.cc; their GPU passes in core/gpu/device_losses.cc): what the
// loss computes and what it asks of the model and the data. The trainer,
// the model, the GPU model and `lockstep predict` read a loss only through
// this.
#ifndef LOCKSTEP_CORE_LOSS_LOSS_H_
#define LOCKSTEP_CORE_LOSS_LOSS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "kernels/cpu/softmax_xent.h"

namespace lockstep {

// The model's last activation a loss computes from the logits itself
// (softmax for cross-entropy over classes, sigmoid for binary
// cross-entropy): a model whose output has it skips it while training and
// the loss reads its logits.
enum class FusedActivation { kNone, kSoftmax, kSigmoid };

// What the model gives and the data asks, for a loss's checks.
struct LossFit {
  int64_t model_outputs = 0;  // the model's outputs per label
  int64_t model_labels = 0;   // the model's labels per sample
  std::string model_shape;    // its output shape, for messages
  int64_t classes = 0;        // the data's
  int64_t labels = 0;         // the data's labels per sample
  std::string source;         // the data's, for messages
};

struct Loss {
  std::string name;  // the job file's
  FusedActivation fused = FusedActivation::kNone;
  // Over `rows` rows of `outputs` values (the model's output per label)
  // and their labels (-1: none): the summed loss, correct and counted
  // rows; `grad` (may be null; may alias out) gets d(loss)/d(out) * scale.
  std::function<LossSums(int64_t rows, int64_t outputs, const float* out,
                         const int32_t* labels, float scale, float* grad)>
      compute;
  // OK when the model's outputs fit the data for this loss; else an
  // InvalidArgument naming what is wrong. Null: the model has one output
  // per class and as many labels per sample as the data (then the trainer
  // words the error).
  std::function<absl::Status(const LossFit&)> check;
  // Whether the outputs fit (when `check` passed or is null). Null:
  // model_outputs == classes.
  std::function<bool(const LossFit&)> fits;
  // The classes a prediction ranks, from the model's outputs per label,
  // and their probabilities from one row of outputs. Null: one class per
  // output, a softmax.
  std::function<int64_t(int64_t outputs)> predicted_classes;
  std::function<void(const float* out, int64_t outputs, double* prob)>
      probabilities;
};

bool RegisterLoss(Loss loss);
// Null when no loss has that name.
const Loss* FindLoss(absl::string_view name);
// Every registered loss, in the order registered (stable: errors list
// their names).
std::vector<const Loss*> Losses();
// The loss of that name; aborts when there is none (tests, and names the
// code itself spells).
const Loss& LossNamed(absl::string_view name);

// The model's output activation this loss computes from the logits, given
// whether the output ends in a softmax and in a sigmoid.
bool FusesOutputActivation(const Loss& loss, bool output_softmax,
                           bool output_sigmoid);

#define LOCKSTEP_REGISTER_LOSS(id, expr)                  \
  static const bool lockstep_loss_##id [[maybe_unused]] = \
      ::lockstep::RegisterLoss(expr)

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LOSS_LOSS_H_
