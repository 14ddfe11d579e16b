// `lockstep train`: every replica of a job in one process, as a
// TrainingSession (core/train/training_session.h) whose host keeps the
// checkpoints, summaries and result.json in local storage and resumes from
// the latest good checkpoint there.
#ifndef LOCKSTEP_CORE_TRAIN_LOCAL_TRAINING_H_
#define LOCKSTEP_CORE_TRAIN_LOCAL_TRAINING_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/job/job_spec.h"
#include "core/log.h"

namespace lockstep {

struct TrainOptions {
  std::string storage_dir;  // results under storage_dir/jobs/NAME/
  int threads = 0;          // compute threads; 0 = every core
  // One GPU replica per ordinal (as many as the job's replicas; needs the
  // CUDA build's backend, core/train/gpu_backend.h); empty: CPU replicas.
  std::vector<int> cuda_devices;
  bool resume = true;  // continue from the latest good checkpoint
  // Stop (checkpoint, then return) once this many global steps are done;
  // < 0 = run to the end. Lets a user train in chunks.
  int64_t stop_after_steps = -1;
  // Set from a signal handler: the loop checkpoints and returns at the next
  // step boundary. Not owned; may be null.
  const std::atomic<bool>* stop_requested = nullptr;
  // Receives progress and event lines (one line each, no trailing newline).
  LogFn log;
  double progress_interval_seconds = 1.0;
};

// One generation's world (a cluster job's result records them all).
struct WorldSpan {
  int64_t generation = 0;
  int64_t from_step = 0;
  int64_t workers = 0;
  int64_t replicas = 0;
  std::string why;
  double started_unix_seconds = 0;  // 0: not recorded
};

struct TrainResult {
  bool finished = false;  // false: stopped early (stop_after_steps/signal)
  int64_t steps = 0;      // global steps done in total
  int64_t total_steps = 0;
  int64_t epochs = 0;  // completed epochs
  int64_t resumed_from_step = 0;
  double train_loss = 0;  // mean over the last epoch run (or part of it)
  double train_accuracy = 0;
  double test_loss = 0;  // last evaluation
  double test_accuracy = 0;
  double samples_per_sec = 0;  // training samples / training seconds, this run
  double wall_seconds = 0;
  int64_t num_parameters = 0;
  // Optimizer state bytes per rank (the largest rank's: cluster.shard
  // spreads the state over the workers).
  int64_t optimizer_state_bytes = 0;
  // precision "fp16": the loss scale at the end and the steps skipped on
  // an overflow (scale 0: no loss scaling).
  double loss_scale = 0;
  int64_t skipped_steps = 0;
  ShardMode shard = ShardMode::kNone;  // cluster.shard
  bool copies = false;      // sharded, each part also on the next rank
  std::string fingerprint;  // of all parameter bytes (core/fingerprint.h)
  // Samples that could not be made (undecodable images), train and test.
  int64_t skipped_samples = 0;
  std::string result_path;      // .../result.json ("" when not finished)
  std::string checkpoint_path;  // the last committed checkpoint
  // Which world ran from which step (cluster jobs); empty: `replicas`.
  std::vector<WorldSpan> membership;
  // Requests from other generations the coordinator refused, by kind
  // (JobStatus.fenced; cluster jobs).
  std::map<std::string, int64_t> fenced;
};

// Runs or resumes `spec`. Returns an error (naming file or field) for bad
// data, a model that does not fit the data, an unwritable storage folder or
// a checkpoint of another model; nothing is written in those cases.
absl::StatusOr<TrainResult> RunLocalTraining(const JobSpec& spec,
                                             const TrainOptions& options);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_TRAIN_LOCAL_TRAINING_H_
