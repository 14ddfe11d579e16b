// Training-loop tallies (see step_meter.h).
#include "core/train/step_meter.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace lockstep {

absl::Status StepMeter::Add(int64_t step, double seconds, int64_t samples,
                            const BatchLoss& loss) {
  if (!std::isfinite(loss.loss_sum)) {
    return absl::FailedPreconditionError(
        absl::StrFormat("training diverged at step %d: the loss is %f (lower "
                        "optimizer.learning_rate?)",
                        step, loss.loss_sum));
  }
  seconds_ += seconds;
  samples_ += samples;
  ++steps_;
  window_seconds_ += seconds;
  window_samples_ += samples;
  epoch_ += loss;
  summary_ += loss;
  return absl::OkStatus();
}

double StepMeter::TakeWindowRate() {
  const double rate =
      window_seconds_ > 0
          ? static_cast<double>(window_samples_) / window_seconds_
          : 0;
  window_seconds_ = 0;
  window_samples_ = 0;
  return rate;
}

double StepMeter::Eta(int64_t steps_left, int64_t global_batch) const {
  const double rate = run_rate();
  if (rate <= 0) return -1;
  const double overhead = overhead_seconds_ / static_cast<double>(steps_);
  return steps_left * (static_cast<double>(global_batch) / rate + overhead);
}

BatchLoss StepMeter::TakeSummary() {
  BatchLoss s = summary_;
  summary_ = BatchLoss();
  return s;
}

std::string EpochDoneLine(const std::string& job, int64_t epoch,
                          const BatchLoss& train, const BatchLoss& eval,
                          double eval_seconds) {
  return absl::StrFormat(
      "[%s] epoch %d done  train loss %.4f  acc %.4f  |  test loss %.4f  acc "
      "%.4f  (%d predictions, eval %.1fs)",
      job, epoch, train.mean_loss(), train.accuracy(), eval.mean_loss(),
      eval.accuracy(), eval.count, eval_seconds);
}

std::vector<std::pair<std::string, double>> EpochScalars(
    const BatchLoss& train, const BatchLoss& eval) {
  return {{"eval/loss", eval.mean_loss()},
          {"eval/accuracy", eval.accuracy()},
          {"epoch/train_loss", train.mean_loss()},
          {"epoch/train_accuracy", train.accuracy()}};
}

}  // namespace lockstep
