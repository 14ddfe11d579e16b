// A job's reports, kept apart from the Coordinator's state lock: its
// TensorBoard summaries (the event file is written here), the curves the
// dashboard draws and the checkpoint figures /metrics shows. Thread-safe
// with a lock of its own, so a report's file writes and a dashboard's copy
// of the curves never hold up heartbeats, registrations or job changes.
// Not journaled: a restarted coordinator draws from its restart on.
#ifndef LOCKSTEP_COORDINATOR_JOB_REPORTS_H_
#define LOCKSTEP_COORDINATOR_JOB_REPORTS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/checkpoint_assembler.h"
#include "core/summary/summary_writer.h"
#include "proto/cluster.pb.h"

namespace lockstep {

class JobReports {
 public:
  // (step, loss, accuracy): training from rank 0's summaries (or its
  // reports when summaries are off), evaluation at each epoch's end.
  struct Curves {
    std::vector<std::array<double, 3>> train, eval;
  };
  struct CheckpointFigures {
    int64_t committed = 0, failed = 0;
    double last_seconds = 0, seconds_total = 0;
    int64_t last_bytes = 0, bytes_total = 0;
  };

  // Opens (creates) the summaries folder. `summaries_off`: the job writes
  // no summaries (summary.every_steps 0), so the reports' running means
  // draw the training curve.
  static absl::StatusOr<std::shared_ptr<JobReports>> Open(
      const std::string& summaries_dir, bool summaries_off);

  // Rank 0's report: its scalars into the event file and the curves. An
  // error is the event file's (the curves are drawn anyway).
  absl::Status Add(const lockstep::v1::ProgressReport& report);
  void CheckpointCommitted(const CommitInfo& info);
  void CheckpointFailed();
  absl::Status Flush();

  Curves curves() const;
  CheckpointFigures checkpoints() const;

 private:
  JobReports(std::unique_ptr<SummaryWriter> summaries, bool summaries_off)
      : summaries_(std::move(summaries)), summaries_off_(summaries_off) {}

  mutable absl::Mutex mu_;
  const std::unique_ptr<SummaryWriter> summaries_;
  const bool summaries_off_;
  Curves curves_ ABSL_GUARDED_BY(mu_);
  CheckpointFigures checkpoints_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_JOB_REPORTS_H_
