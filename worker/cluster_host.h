// The SessionHost of a worker's rank (core/train/training_session.h): the
// starting checkpoint fetched from the coordinator, checkpoint slices
// uploaded to it, progress, summaries and events reported by rank 0 and
// fingerprints by every rank, the coordinator's STOP and this worker's
// shutdown as the session's stop and leave flags.
#ifndef LOCKSTEP_WORKER_CLUSTER_HOST_H_
#define LOCKSTEP_WORKER_CLUSTER_HOST_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "base/seconds.h"
#include "core/log.h"
#include "core/train/training_session.h"
#include "proto/cluster.grpc.pb.h"
#include "worker/job_runner.h"
#include "worker/step_times.h"

namespace lockstep {

// What a rank's session reports and asks of the coordinator.
class ClusterHost : public SessionHost {
 public:
  ClusterHost(const lockstep::v1::Assignment& a, const RunnerContext& ctx)
      : a_(a), ctx_(ctx), step_(a.start_step()) {}

  absl::StatusOr<std::optional<LoadedCheckpoint>> StartingCheckpoint() override;
  absl::StatusOr<std::string> NcclId() override;
  absl::Status SaveCheckpoint(const CheckpointState& state,
                              const NamedTensors& model,
                              const OptimizerParts& optimizer,
                              bool final) override;
  bool ProgressDue(int64_t step, bool boundary) override;
  absl::Status Progress(const ProgressInfo& info,
                        const std::string* fingerprint) override;
  absl::Status Scalars(int64_t step, const ScalarList& values) override;
  void Event(const std::string& line) override {
    if (chief()) pending_.add_events(line);
  }
  // Every line names the job, generation, rank and step it is about.
  void Log(const std::string& line) override {
    if (!ctx_.log) return;
    LogRecord r(line);
    r.job = a_.job();
    r.generation = a_.generation();
    r.rank = a_.rank();
    r.step = step_;
    ctx_.log(r);
  }
  void StepDone(const StepFigures& f) override;
  absl::Status EndStep(int64_t step) override;
  // To the coordinator, waiting while it restarts: the step's collective
  // does not start before the record is kept.
  absl::Status SamplesTaken(SampleRecord& record) override;
  bool StopRequested() const override {
    return ctx_.stop != nullptr && ctx_.stop->load(std::memory_order_relaxed);
  }
  bool Leaving() const override {
    return ctx_.leave != nullptr && ctx_.leave->load(std::memory_order_relaxed);
  }
  bool Regrouping() const override {
    return ctx_.regroup != nullptr &&
           ctx_.regroup->load(std::memory_order_relaxed);
  }

  // Sends the report Progress made due (its events with it), once; the
  // coordinator unreachable is logged and training goes on.
  absl::Status SendDueReport();
  // Sends `report` (named as this rank's); Cancelled when the coordinator
  // says the job stopped.
  absl::Status Report(lockstep::v1::ProgressReport& report);
  // Calls `call` until it succeeds or fails otherwise than unreachable,
  // every second for up to 10 minutes or until the job is stopped.
  absl::Status WhileCoordinatorRestarts(
      const std::string& what, const std::function<absl::Status()>& call);
  // Appends this run's step end times to RunnerContext::step_times (when
  // set); a failure is logged, not returned: the run is over either way.
  void WriteStepTimes();

 private:
  bool chief() const { return a_.rank() == 0; }
  // The state of Assignment.memory_step: this worker's own kept copy when
  // it has it, else fetched from the donor rank; checked against the
  // announced fingerprint.
  absl::StatusOr<LoadedCheckpoint> KeptStateToStartFrom();
  // Sharded with copies: the whole state put together from the parts the
  // ranks kept (Assignment.memory_part_donors), its own and fetched ones;
  // DataLoss when they do not cover every tensor once.
  absl::StatusOr<LoadedCheckpoint> KeptPartsToStartFrom();

  const lockstep::v1::Assignment& a_;
  const RunnerContext& ctx_;
  int64_t step_;  // for the log lines: the generation's start, then each step
  lockstep::v1::ProgressReport pending_;  // scalars and events not yet sent
  bool report_due_ = false;
  bool kept_released_ = false;  // RunnerContext::kept cleared this run
  Clock::time_point last_report_ = Clock::now();
  bool coordinator_down_ = false;
  StepTimes step_times_;  // filled only with RunnerContext::step_times set
};

}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_CLUSTER_HOST_H_
