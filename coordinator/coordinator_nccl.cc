// The Coordinator's NCCL bootstrap relay (see coordinator.h): rank 0's
// ncclUniqueId reaches every rank of the generation through the control
// plane, as Horovod broadcasts it; the coordinator never joins the
// communicator itself.
#include <algorithm>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "coordinator/coordinator.h"

namespace lockstep {

namespace {
constexpr size_t kNcclUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
constexpr double kMaxNcclWaitSeconds = 300;
}  // namespace

absl::StatusOr<Coordinator::Job*> Coordinator::NcclGeneration(
    const lockstep::v1::NcclIdRequest& req, int* rank) {
  Job* job = FindJob(req.job());
  if (job == nullptr) {
    return absl::NotFoundError(
        absl::StrFormat("no job named \"%s\"", req.job()));
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

absl::Status Coordinator::PublishNcclId(
    const lockstep::v1::NcclIdRequest& req) {
  absl::MutexLock lock(&mu_);
  int rank = -1;
  ASSIGN_OR_RETURN(Job * job, NcclGeneration(req, &rank));
  if (rank != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "only rank 0 publishes the NCCL id of job %s generation %d; worker "
        "%s is rank %d",
        req.job(), req.generation(), req.worker_id(), rank));
  }
  if (req.unique_id().size() != kNcclUniqueIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("an NCCL unique id is %d bytes, got %d",
                        kNcclUniqueIdBytes, req.unique_id().size()));
  }
  if (!job->nccl_id.empty() && job->nccl_id != req.unique_id()) {
    return absl::AlreadyExistsError(
        absl::StrFormat("job %s generation %d already has another NCCL id",
                        req.job(), req.generation()));
  }
  job->nccl_id = req.unique_id();
  changed_.SignalAll();
  return absl::OkStatus();
}

absl::StatusOr<std::string> Coordinator::FetchNcclId(
    const lockstep::v1::NcclIdRequest& req) {
  const double wait =
      std::min(std::max(req.wait_seconds(), 0.0), kMaxNcclWaitSeconds);
  const absl::Time deadline = absl::Now() + absl::Seconds(wait);
  absl::MutexLock lock(&mu_);
  while (true) {
    int rank = -1;
    ASSIGN_OR_RETURN(Job * job, NcclGeneration(req, &rank));
    if (!job->nccl_id.empty()) return job->nccl_id;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "rank 0 of job %s generation %d has not published its NCCL id "
          "within %.0f s",
          req.job(), req.generation(), wait));
    }
    changed_.WaitWithDeadline(&mu_, deadline);
  }
}

}  // namespace lockstep
