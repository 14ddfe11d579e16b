// What the coordinator shows (the job service's queries, the CLI's status
// and list, /metrics and the dashboard): a job's snapshot with its ranks'
// lines, a worker's line, the list, a watch that waits for a change, and
// the operations view with each job's curves and checkpoint figures.
// Read-only: it takes the Coordinator's state lock itself (Snapshot and
// WorkerView are called with it held).
#ifndef LOCKSTEP_COORDINATOR_JOB_VIEWS_H_
#define LOCKSTEP_COORDINATOR_JOB_VIEWS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/coordinator_options.h"
#include "coordinator/job_reports.h"
#include "coordinator/job_table.h"
#include "coordinator/membership.h"
#include "proto/cluster.pb.h"
#include "proto/jobs.pb.h"

namespace lockstep {

class JobViews {
 public:
  using Worker = Membership::Worker;
  using Job = JobTable::Job;
  using Curves = JobReports::Curves;
  using CheckpointFigures = JobReports::CheckpointFigures;
  struct JobView {
    lockstep::v1::JobStatus status;
    Curves curves;
    CheckpointFigures checkpoints;
  };
  struct OpsView {
    std::vector<JobView> jobs;  // submit order
    std::vector<lockstep::v1::WorkerStatus> workers;
    // NotServing() and journal_store().refused_writes() (with --etcd: a
    // standby's "not the leader: ...", and a deposed leader's refused writes);
    // set by the Coordinator.
    std::string not_serving;
    int64_t refused_journal_writes = 0;
  };

  // None of these is owned; `changed` is signalled at every job change.
  JobViews(const CoordinatorOptions& options, absl::Mutex& mu,
           absl::CondVar& changed, const Membership& members,
           const JobTable& jobs)
      : options_(options),
        mu_(mu),
        changed_(changed),
        members_(members),
        jobs_(jobs) {}

  // The job service's Get, List and WaitForChange; the jobs RUNNING, for
  // the shutdown.
  absl::StatusOr<lockstep::v1::JobStatus> Get(const std::string& name) const
      ABSL_LOCKS_EXCLUDED(mu_);
  lockstep::v1::ListJobsResponse List() const ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until the job changed after `*events_seen`/`*version` or
  // `deadline`; returns the snapshot with the events after *events_seen
  // and advances both. NotFound for an unknown job.
  absl::StatusOr<lockstep::v1::JobStatus> WaitForChange(
      const std::string& name, int64_t* version, int64_t* events_seen,
      absl::Time deadline) const ABSL_LOCKS_EXCLUDED(mu_);
  int RunningJobs() const ABSL_LOCKS_EXCLUDED(mu_);
  // Every job's view with its curves and checkpoint figures, and the
  // workers (the curves read outside mu_: JobReports has its own lock).
  OpsView Ops() const ABSL_LOCKS_EXCLUDED(mu_);

  // A job's status as its watchers see it: its ranks' lines while it has
  // not ended, what it waits for, a stalled ring, its straggler. Called
  // with the state lock held (the Coordinator's mu_, which clang's
  // analysis cannot tell is this part's mu_: not annotated).
  lockstep::v1::JobStatus Snapshot(const Job& job) const;
  // A worker's line: its address, devices, job, rank, heartbeat age, wait,
  // figures and share of the global batch. With the state lock held.
  lockstep::v1::WorkerStatus WorkerView(const Worker& w) const;

 private:
  absl::Time Now() const { return options_.time->Now(); }

  const CoordinatorOptions& options_;
  absl::Mutex& mu_;
  absl::CondVar& changed_;
  const Membership& members_ ABSL_GUARDED_BY(mu_);
  const JobTable& jobs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_JOB_VIEWS_H_
