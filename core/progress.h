// Progress lines for long jobs: epoch, step/total, loss, accuracy, learning
// rate, samples/s and ETA, in one fixed format shared by every front end.
#ifndef LOCKSTEP_CORE_PROGRESS_H_
#define LOCKSTEP_CORE_PROGRESS_H_

#include <cstdint>
#include <string>

namespace lockstep {

struct ProgressInfo {
  std::string job;
  int64_t epoch = 0;         // 1-based for display
  int64_t epochs = 0;        // 0 when the job counts steps only
  int64_t step = 0;          // global steps done
  int64_t total_steps = 0;
  double loss = 0;
  double accuracy = 0;
  double learning_rate = 0;
  double samples_per_sec = 0;
  double eta_seconds = -1;   // < 0: unknown
  // Optimizer state held by this process (cluster.shard: its part).
  int64_t optimizer_state_bytes = 0;
  // precision "fp16": the loss scale (0: none) and the steps skipped on an
  // overflow so far.
  double loss_scale = 0;
  int64_t skipped_steps = 0;
};

// "[mnist] epoch 1/3  step 400/2814  loss 0.2215  acc 0.9334  lr 1.0e-03
//  9,812 samples/s  ETA 0:00:12", with "  scale 32768 (1 skipped)" after
// the learning rate when the job scales its loss.
std::string FormatProgress(const ProgressInfo& info);
// "1:02:03", "0:00:12"; "?" for negative.
std::string FormatDuration(double seconds);
// 12345.6 -> "12,346".
std::string FormatThousands(double value);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_PROGRESS_H_
