// JobViews (see job_views.h).
#include "coordinator/job_views.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "coordinator/straggler.h"

namespace lockstep {

using lockstep::v1::JobStatus;

JobViews::OpsView JobViews::Ops() const {
  OpsView v;
  lockstep::v1::ListJobsResponse list = List();
  std::vector<std::shared_ptr<JobReports>> reports;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& s : list.jobs()) {
      const Job* job = jobs_.Find(s.name());
      reports.push_back(job == nullptr ? nullptr : job->reports);
    }
  }
  for (int i = 0; i < list.jobs_size(); ++i) {
    if (reports[i] == nullptr) continue;
    v.jobs.push_back(
        {list.jobs(i), reports[i]->curves(), reports[i]->checkpoints()});
  }
  v.workers.assign(list.workers().begin(), list.workers().end());
  return v;
}

lockstep::v1::WorkerStatus JobViews::WorkerView(const Worker& w) const {
  lockstep::v1::WorkerStatus v;
  v.set_worker_id(w.id);
  v.set_host(w.info.host());
  v.set_pid(w.info.pid());
  v.set_address(w.info.collective_address());
  v.set_replicas(w.info.replicas());
  for (const std::string& d : w.info.devices()) v.add_devices(d);
  v.set_job(w.job);
  v.set_rank(w.rank);
  v.set_heartbeat_age_seconds(absl::ToDoubleSeconds(Now() - w.last_heartbeat));
  v.set_alive(!w.lost);
  v.set_name(w.name);
  v.set_waiting(members_.WaitText(w, 1.0));
  if (!w.job.empty()) {
    const RankFigures f = FiguresOf(w.timing);
    v.set_ring_ms_per_mib(std::max(0.0, f.RingMsPerMib()));
    v.set_compute_ms_per_step(std::max(0.0, f.ComputeMsPerStep()));
  }
  const Job* job = jobs_.Find(w.job);
  // A rank inside its job's rank table (a damaged journal can name a job
  // whose table is empty: no division by a zero world).
  if (!w.job.empty() && w.rank >= 0 && job != nullptr &&
      w.rank < static_cast<int64_t>(job->ranks.size())) {
    const JobSpec& spec = job->spec;
    const int64_t r = spec.cluster.replicas_per_worker;
    const int64_t total = r * static_cast<int64_t>(job->ranks.size());
    // ShardPlan::ReplicaSlice's split of the job's global batch.
    const int64_t g = spec.global_batch_size();
    v.set_shard(absl::StrFormat(
        "replicas %d-%d of %d: samples [%d, %d) of each global batch of %d",
        w.rank * r, w.rank * r + r - 1, total, w.rank * r * g / total,
        (w.rank + 1) * r * g / total, g));
    v.set_step(job->status.step());
  }
  return v;
}

JobStatus JobViews::Snapshot(const Job& job) const {
  JobStatus s = job.status;
  s.set_epochs(job.spec.epochs);
  int alive = 0;
  for (const std::string& id : job.ranks) {
    const Worker* found = members_.Find(id);  // a finished job's may be
    if (found == nullptr) continue;           // forgotten
    const Worker& w = *found;
    if (!w.lost) ++alive;
    // A finished job's workers may already run something else.
    if (!IsTerminal(job.status.state())) *s.add_workers() = WorkerView(w);
  }
  s.set_workers_alive(alive);
  const bool waiting = job.status.state() == lockstep::v1::PENDING ||
                       job.status.state() == lockstep::v1::RECOVERING;
  if (waiting) {
    // The last generation's speed and ETA say nothing while it waits.
    s.set_samples_per_sec(0);
    s.set_eta_seconds(-1);
    s.set_waiting_for(job.waiting_for);
    s.set_waiting_seconds_left(
        job.waiting_until == absl::InfiniteFuture()
            ? -1
            : std::max(0.0, absl::ToDoubleSeconds(job.waiting_until - Now())));
  } else {
    s.clear_recovery();
  }
  if (job.status.state() == lockstep::v1::RUNNING &&
      !job.straggler.text().empty()) {
    *s.mutable_straggler() = job.straggler;
  }
  if (job.status.state() == lockstep::v1::RUNNING) {
    for (const std::string& id : job.ranks) {
      const std::string wait =
          members_.WaitText(*members_.Find(id), options_.hang_report_seconds);
      if (!wait.empty()) {
        s.set_message(absl::StrCat("the ring is stalled: ", wait));
        break;
      }
    }
  }
  s.set_events_total(static_cast<int64_t>(job.events.size()));
  for (const std::string& e : job.events) s.add_events(e);
  return s;
}

int JobViews::RunningJobs() const {
  absl::MutexLock lock(&mu_);
  return jobs_.Count(lockstep::v1::RUNNING);
}

absl::StatusOr<JobStatus> JobViews::Get(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(const Job* job, jobs_.Get(name));
  return Snapshot(*job);
}

lockstep::v1::ListJobsResponse JobViews::List() const {
  absl::MutexLock lock(&mu_);
  lockstep::v1::ListJobsResponse out;
  for (const Job* job : jobs_.InOrder()) *out.add_jobs() = Snapshot(*job);
  for (const auto& [id, w] : members_.workers()) {
    *out.add_workers() = WorkerView(w);
  }
  return out;
}

absl::StatusOr<JobStatus> JobViews::WaitForChange(const std::string& name,
                                                  int64_t* version,
                                                  int64_t* events_seen,
                                                  absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  while (true) {
    ASSIGN_OR_RETURN(const Job* found, jobs_.Get(name));
    const Job& job = *found;
    if (job.version != *version || absl::Now() >= deadline) {
      JobStatus s = Snapshot(job);
      s.clear_events();
      for (size_t i = static_cast<size_t>(*events_seen); i < job.events.size();
           ++i) {
        s.add_events(job.events[i]);
      }
      *events_seen = static_cast<int64_t>(job.events.size());
      *version = job.version;
      return s;
    }
    changed_.WaitWithDeadline(&mu_, deadline);
  }
}

}  // namespace lockstep
