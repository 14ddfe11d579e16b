// Protocol step 2 (coordinator.h): a job's submission (its name is its
// identity, coordinator/submit_policy.h: the same spec again returns the
// existing job; another spec needs a resume or a restart) and its cancel;
// the files a job keeps on the storage. A part of the Coordinator: it
// takes the state lock itself.
#ifndef LOCKSTEP_COORDINATOR_SUBMISSIONS_H_
#define LOCKSTEP_COORDINATOR_SUBMISSIONS_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/coordinator_options.h"
#include "coordinator/gang_starts.h"
#include "coordinator/job_events.h"
#include "coordinator/job_table.h"
#include "coordinator/job_views.h"
#include "coordinator/submit_policy.h"
#include "proto/jobs.pb.h"

namespace lockstep {

class Submissions {
 public:
  using Job = JobTable::Job;

  // None of these is owned; `mu` guards jobs, the other parts and
  // `shutting_down` (set: submissions are refused UNAVAILABLE).
  Submissions(const CoordinatorOptions& options, absl::Mutex& mu,
              JobTable& jobs, JobEvents& events, GangStarts& starts,
              const JobViews& views, const bool& shutting_down)
      : options_(options),
        mu_(mu),
        jobs_(jobs),
        events_(events),
        starts_(starts),
        views_(views),
        shutting_down_(shutting_down) {}

  // A new PENDING job, started when workers are idle; the same spec again
  // returns the name's job (*existing set, when not null); `mode` asks to
  // resume or restart a name whose spec changed.
  absl::StatusOr<lockstep::v1::JobStatus> Submit(
      const std::string& job_json, SubmitMode mode = SubmitMode::kNew,
      bool* existing = nullptr) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends a job that has not ended CANCELLED (its workers are free);
  // NotFound for an unknown name.
  absl::StatusOr<lockstep::v1::JobStatus> Cancel(const std::string& name)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Opens a job's files under STORAGE/jobs/NAME: its checkpoint store and
  // assembler, its summaries and, with audit.samples, its audit file. For a
  // submitted job and for one read back from the journal.
  absl::Status OpenJobFiles(Job& job) const;

 private:
  absl::Time Now() const { return options_.time->Now(); }

  const CoordinatorOptions& options_;
  absl::Mutex& mu_;
  JobTable& jobs_ ABSL_GUARDED_BY(mu_);
  JobEvents& events_;
  GangStarts& starts_ ABSL_GUARDED_BY(mu_);
  const JobViews& views_;
  const bool& shutting_down_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_SUBMISSIONS_H_
