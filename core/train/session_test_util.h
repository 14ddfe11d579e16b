// What TrainingSession's tests share: a small job (a conv, dense layers and
// a middle layer of the caller's choosing, on synthetic data), a host that
// keeps checkpoints in memory and records what the session reports, and
// the config of one process holding every replica. Test-only.
#ifndef LOCKSTEP_CORE_TRAIN_SESSION_TEST_UTIL_H_
#define LOCKSTEP_CORE_TRAIN_SESSION_TEST_UTIL_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/job/job_spec.h"
#include "core/train/training_session.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace session_testing {

inline constexpr char kDropout[] = R"({"type": "dropout", "rate": 0.25},)";
inline constexpr char kSyncBatchNorm[] =
    R"({"type": "batch_norm", "sync": true},)";

// `batch` samples per replica in `micros` micro-batches; `middle`: a layer
// (and its comma) after the hidden dense layer, or "".
inline JobSpec Job(int64_t workers, int units = 10, int64_t batch = 8,
                   int64_t micros = 1, const char* middle = kDropout) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(
      absl::StrFormat(R"({
    "name": "session", "seed": 11,
    "model": {"input_shape": [8, 8, 1], "layers": [
      {"type": "conv2d", "filters": 4, "kernel_size": 3, "activation": "relu"},
      {"type": "flatten"},
      {"type": "dense", "units": 16, "activation": "tanh"},
      %s
      {"type": "dense", "units": %d}]},
    "optimizer": {"type": "adam", "learning_rate": 0.01},
    "data": {"format": "synthetic", "train_samples": 160,
             "test_samples": 50},
    "batch_size_per_replica": %d, "gradient_accumulation_steps": %d,
    "epochs": 2,
    "checkpoint": {"every_steps": 4}, "summary": {"every_steps": 3},
    "cluster": {"workers": %d}})",
                      middle, units, batch / micros, micros, workers));
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

// Keeps checkpoints in memory and records what the session reports.
class MemoryHost : public SessionHost {
 public:
  std::optional<LoadedCheckpoint> start;
  int64_t stop_after = -1;   // StopRequested once this many steps are done
  int64_t leave_after = -1;  // Leaving once this many steps are done
  // A sharded rank's optimizer parts are kept as they come (a world of
  // one, whose one part is the whole); else a sharded save fails the test.
  bool sharded_ok = false;

  absl::StatusOr<std::optional<LoadedCheckpoint>> StartingCheckpoint()
      override {
    return start;
  }
  absl::StatusOr<std::string> NcclId() override {
    return absl::FailedPreconditionError("no GPUs in this test");
  }
  absl::Status SaveCheckpoint(const CheckpointState& state,
                              const NamedTensors& model,
                              const OptimizerParts& optimizer,
                              bool final) override {
    LoadedCheckpoint c;
    c.state = state;
    for (const auto& [name, t] : model) c.model.emplace_back(name, *t);
    if (!sharded_ok) EXPECT_FALSE(optimizer.sharded);
    for (const auto& [name, t] : optimizer.Whole()) {
      c.optimizer.emplace_back(name, *t);
    }
    c.path = absl::StrFormat("memory/step-%08d", state.step);
    checkpoints[state.step] = std::move(c);
    if (final) final_step = state.step;
    return absl::OkStatus();
  }
  bool ProgressDue(int64_t step, bool boundary) override { return boundary; }
  absl::Status Progress(const ProgressInfo& info,
                        const std::string* fingerprint) override {
    progress_steps.push_back(info.step);
    if (fingerprint != nullptr) fingerprints[info.step] = *fingerprint;
    return absl::OkStatus();
  }
  absl::Status Scalars(int64_t step, const ScalarList& values) override {
    for (const auto& [tag, v] : values) scalars[tag].push_back(step);
    return absl::OkStatus();
  }
  void Event(const std::string& line) override { events.push_back(line); }
  void Log(const std::string& line) override { logs.push_back(line); }
  void StepDone(const StepFigures& f) override {
    steps_done = f.step;
    samples += f.local_samples;
  }
  bool StopRequested() const override {
    return stop_after >= 0 && steps_done >= stop_after;
  }
  bool Leaving() const override {
    return leave_after >= 0 && steps_done >= leave_after;
  }

  std::map<int64_t, LoadedCheckpoint> checkpoints;
  int64_t final_step = -1;
  std::vector<int64_t> progress_steps;
  std::map<int64_t, std::string> fingerprints;
  std::map<std::string, std::vector<int64_t>> scalars;
  std::vector<std::string> events, logs;
  std::atomic<int64_t> steps_done{0};
  int64_t samples = 0;
};

inline SessionConfig LocalConfig(const JobSpec& spec) {
  SessionConfig c;
  c.spec = spec;
  c.job_json = JobSpecToJson(spec);
  for (int64_t r = 0; r < spec.total_replicas(); ++r) c.replicas.push_back(r);
  c.world_replicas = spec.total_replicas();
  c.threads = 1;
  return c;
}

}  // namespace session_testing
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_TRAIN_SESSION_TEST_UTIL_H_
