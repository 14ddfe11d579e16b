// What the ranks report during and at the end of a generation
// (coordinator.h, protocol steps 4-6): progress (rank 0's steps, loss,
// events and scalars; every rank's fingerprints, compared once all are
// in), the sample audit's records, and each rank's Finish: a failure it
// names (to Failures), a regroup, a drain, or its result; once every rank
// finished, result.json and SUCCEEDED. A part of the Coordinator: it takes
// the Coordinator's state lock itself (and leaves it for the summaries and
// the audit file, which have their own).
#ifndef LOCKSTEP_COORDINATOR_RANK_REPORTS_H_
#define LOCKSTEP_COORDINATOR_RANK_REPORTS_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/coordinator_options.h"
#include "coordinator/failures.h"
#include "coordinator/gang_starts.h"
#include "coordinator/job_events.h"
#include "coordinator/job_table.h"
#include "coordinator/membership.h"
#include "proto/cluster.pb.h"

namespace lockstep {

class RankReports {
 public:
  using Worker = Membership::Worker;
  using Job = JobTable::Job;

  // None of these is owned; `mu` guards members, jobs and the other parts.
  RankReports(const CoordinatorOptions& options, absl::Mutex& mu,
              Membership& members, JobTable& jobs, JobEvents& events,
              GangStarts& starts, Failures& failures)
      : options_(options),
        mu_(mu),
        members_(members),
        jobs_(jobs),
        events_(events),
        starts_(starts),
        failures_(failures) {}

  // The services' ReportProgress, RecordSamples and Finish (coordinator.h,
  // steps 4-6).
  absl::StatusOr<lockstep::v1::ReportResponse> ReportProgress(
      const lockstep::v1::ProgressReport& report) ABSL_LOCKS_EXCLUDED(mu_);
  // A rank's samples of one step (audit.samples): appended to the job's
  // audit file; stop when its generation is over (fenced, "samples").
  absl::StatusOr<lockstep::v1::ReportResponse> RecordSamples(
      const lockstep::v1::SampleRecord& record) ABSL_LOCKS_EXCLUDED(mu_);
  // Sets *over (when not null) if the report comes after the job or its
  // generation ended (FinishResponse.over).
  absl::Status Finish(const lockstep::v1::FinishRequest& req,
                      std::string* over = nullptr) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Time Now() const { return options_.time->Now(); }
  // Once every rank's fingerprint of `step` is in: a mismatch ends the job
  // FAILED, naming the ranks.
  void CompareFingerprints(Job& job, int64_t step)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every rank finished: result.json from rank 0's report and the
  // membership history, then SUCCEEDED (FAILED when it cannot be written).
  void CompleteIfDone(Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CoordinatorOptions& options_;
  absl::Mutex& mu_;
  Membership& members_ ABSL_GUARDED_BY(mu_);
  JobTable& jobs_ ABSL_GUARDED_BY(mu_);
  JobEvents& events_;
  GangStarts& starts_ ABSL_GUARDED_BY(mu_);
  Failures& failures_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_RANK_REPORTS_H_
