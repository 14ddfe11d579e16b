// NcclBootstrap (see nccl_bootstrap.h).
#include "coordinator/nccl_bootstrap.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace lockstep {

namespace {
constexpr double kMaxNcclWaitSeconds = 300;
}  // namespace

absl::StatusOr<NcclBootstrap::Job*> NcclBootstrap::NcclGeneration(
    const lockstep::v1::NcclIdRequest& req, int* rank) {
  ASSIGN_OR_RETURN(Job * job, jobs_.Get(req.job()));
  if (job->status.generation() != req.generation()) {
    events_.Fenced(*job, "nccl_id", req.generation(),
                   "worker " + req.worker_id());
  }
  if (job->status.state() != lockstep::v1::RUNNING ||
      job->status.generation() != req.generation()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "job %s generation %d is over (the job is %s at generation %d)",
        req.job(), req.generation(), JobStateName(job->status.state()),
        job->status.generation()));
  }
  for (size_t r = 0; r < job->ranks.size(); ++r) {
    if (job->ranks[r] == req.worker_id()) {
      *rank = static_cast<int>(r);
      return job;
    }
  }
  return absl::PermissionDeniedError(
      absl::StrFormat("worker %s holds no rank of job %s generation %d",
                      req.worker_id(), req.job(), req.generation()));
}

absl::Status NcclBootstrap::PublishNcclId(
    const lockstep::v1::NcclIdRequest& req) {
  if (req.unique_id().size() != kNcclUniqueIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("an NCCL unique id is %d bytes, got %d",
                        kNcclUniqueIdBytes, req.unique_id().size()));
  }
  {
    absl::MutexLock lock(&mu_);
    int rank = -1;
    ASSIGN_OR_RETURN(Job * job, NcclGeneration(req, &rank));
    if (rank != 0) {
      return absl::PermissionDeniedError(absl::StrFormat(
          "only rank 0 publishes the NCCL id of job %s generation %d; worker "
          "%s is rank %d",
          req.job(), req.generation(), req.worker_id(), rank));
    }
    if (job->nccl_id.empty()) {
      // Journaled before any rank has it: a coordinator that takes over
      // hands out the same id (LoadJournal republishes it).
      job->nccl_id = req.unique_id();
      events_.Persist();
    }
  }
  // Outside the state lock: the relay has its own (and refuses another id
  // of the same generation).
  return nccl_ids_.Publish(req.job(), req.generation(), req.unique_id());
}

void NcclBootstrap::Republish(const Job& job) {
  if (job.nccl_id.empty() || job.status.state() != lockstep::v1::RUNNING) {
    return;
  }
  nccl_ids_.Publish(job.name, job.status.generation(), job.nccl_id)
      .IgnoreError();  // a fresh relay holds nothing else
}

absl::StatusOr<std::string> NcclBootstrap::FetchNcclId(
    const lockstep::v1::NcclIdRequest& req) {
  const double wait =
      std::min(std::max(req.wait_seconds(), 0.0), kMaxNcclWaitSeconds);
  const absl::Time deadline = absl::Now() + absl::Seconds(wait);
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      int rank = -1;
      RETURN_IF_ERROR(NcclGeneration(req, &rank).status());
    }
    std::string id;
    switch (nccl_ids_.Await(req.job(), req.generation(), deadline, &id)) {
      case NcclIdRelay::Wait::kPublished:
        return id;
      case NcclIdRelay::Wait::kEnded:
        continue;  // NcclGeneration says how it ended
      case NcclIdRelay::Wait::kTimedOut:
        return absl::DeadlineExceededError(absl::StrFormat(
            "rank 0 of job %s generation %d has not published its NCCL id "
            "within %.0f s",
            req.job(), req.generation(), wait));
    }
  }
}

}  // namespace lockstep
