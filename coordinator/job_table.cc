// JobTable (see job_table.h).
#include "coordinator/job_table.h"

#include "absl/strings/str_format.h"

namespace lockstep {

const char* JobStateName(lockstep::v1::JobState state) {
  switch (state) {
    case lockstep::v1::PENDING:
      return "PENDING";
    case lockstep::v1::RUNNING:
      return "RUNNING";
    case lockstep::v1::RECOVERING:
      return "RECOVERING";
    case lockstep::v1::SUCCEEDED:
      return "SUCCEEDED";
    case lockstep::v1::FAILED:
      return "FAILED";
    case lockstep::v1::CANCELLED:
      return "CANCELLED";
    default:
      return "UNKNOWN";
  }
}

bool IsTerminal(lockstep::v1::JobState state) {
  return state == lockstep::v1::SUCCEEDED || state == lockstep::v1::FAILED ||
         state == lockstep::v1::CANCELLED;
}

JobTable::Job* JobTable::Find(const std::string& name) {
  auto it = jobs_.find(name);
  return it == jobs_.end() ? nullptr : it->second.get();
}

const JobTable::Job* JobTable::Find(const std::string& name) const {
  auto it = jobs_.find(name);
  return it == jobs_.end() ? nullptr : it->second.get();
}

absl::StatusOr<JobTable::Job*> JobTable::Get(const std::string& name) {
  Job* job = Find(name);
  if (job == nullptr) {
    return absl::NotFoundError(absl::StrFormat("no job named \"%s\"", name));
  }
  return job;
}

absl::StatusOr<const JobTable::Job*> JobTable::Get(
    const std::string& name) const {
  const Job* job = Find(name);
  if (job == nullptr) {
    return absl::NotFoundError(absl::StrFormat("no job named \"%s\"", name));
  }
  return job;
}

JobTable::Job& JobTable::Put(std::unique_ptr<Job> job) {
  Job& ref = *job;
  if (jobs_.count(ref.name) == 0) order_.push_back(ref.name);
  jobs_[ref.name] = std::move(job);
  return ref;
}

std::vector<JobTable::Job*> JobTable::InOrder() {
  std::vector<Job*> out;
  out.reserve(order_.size());
  for (const std::string& name : order_) out.push_back(jobs_.at(name).get());
  return out;
}

std::vector<const JobTable::Job*> JobTable::InOrder() const {
  std::vector<const Job*> out;
  out.reserve(order_.size());
  for (const std::string& name : order_) out.push_back(jobs_.at(name).get());
  return out;
}

int JobTable::Count(lockstep::v1::JobState state) const {
  int n = 0;
  for (const auto& [name, job] : jobs_) {
    if (job->status.state() == state) ++n;
  }
  return n;
}

std::set<std::string> JobTable::RankedWorkers() const {
  std::set<std::string> ranked;
  for (const auto& [name, job] : jobs_) {
    if (IsTerminal(job->status.state())) continue;
    ranked.insert(job->ranks.begin(), job->ranks.end());
  }
  return ranked;
}

absl::Status CheckReporter(const JobTable::Job& job, int rank,
                           const std::string& worker_id, const char* what) {
  // A rank outside the ring would put a fingerprint no worker holds beside
  // the real ones, or count towards CompleteIfDone's "every rank finished"
  // with no rank 0 for it to read; one in another worker's name would count
  // as that rank's.
  if (rank < 0 || rank >= static_cast<int>(job.ranks.size())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s for rank %d of job %s, which has ranks 0..%d", what,
                        rank, job.name, job.ranks.size() - 1));
  }
  if (job.ranks[rank] == worker_id) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s for rank %d of job %s from worker \"%s\", but rank %d of "
      "generation %d is worker %s",
      what, rank, job.name, worker_id, rank, job.status.generation(),
      job.ranks[rank]));
}

}  // namespace lockstep
