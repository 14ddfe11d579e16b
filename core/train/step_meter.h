// The running tallies of a training loop, shared by `lockstep train` and the
// cluster worker: step times and samples (run and window rates, ETA), the
// epoch's and the summary interval's loss, the divergence check, and the
// epoch-end line and scalars.
#ifndef LOCKSTEP_CORE_TRAIN_STEP_METER_H_
#define LOCKSTEP_CORE_TRAIN_STEP_METER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/model/model.h"

namespace lockstep {

class StepMeter {
 public:
  // Records step `step` (1-based count after it) of `samples` that took
  // `seconds`. FailedPrecondition naming the step when the loss is not
  // finite (training diverged).
  absl::Status Add(int64_t step, double seconds, int64_t samples,
                   const BatchLoss& loss);

  // Samples per second of training over the whole run (0 before a step).
  double run_rate() const {
    return seconds_ > 0 ? static_cast<double>(samples_) / seconds_ : 0;
  }
  // Samples per second since the previous call.
  double TakeWindowRate();
  // Seconds for `steps_left` steps of `global_batch` at the run rate; -1
  // when unknown.
  double Eta(int64_t steps_left, int64_t global_batch) const;
  // Seconds the loop spent between steps (evaluation, checkpoints,
  // summaries): not in the rate, but in the ETA, per step on average.
  void AddOverhead(double seconds) { overhead_seconds_ += seconds; }

  const BatchLoss& epoch() const { return epoch_; }
  void EndEpoch() { epoch_ = BatchLoss(); }
  // The loss since the previous call (for summaries).
  BatchLoss TakeSummary();

 private:
  double seconds_ = 0;
  int64_t samples_ = 0;
  int64_t steps_ = 0;
  double overhead_seconds_ = 0;
  double window_seconds_ = 0;
  int64_t window_samples_ = 0;
  BatchLoss epoch_, summary_;
};

// "[job] epoch 3 done  train loss 0.0251  acc 0.9928  |  test loss 0.0380
//  acc 0.9856  (10000 predictions, eval 0.3s)".
std::string EpochDoneLine(const std::string& job, int64_t epoch,
                          const BatchLoss& train, const BatchLoss& eval,
                          double eval_seconds);
// eval/loss, eval/accuracy, epoch/train_loss, epoch/train_accuracy.
std::vector<std::pair<std::string, double>> EpochScalars(const BatchLoss& train,
                                                         const BatchLoss& eval);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_TRAIN_STEP_METER_H_
