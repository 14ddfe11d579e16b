// NCCL bootstrap (cluster.proto PublishNcclId / FetchNcclId; coordinator.h,
// protocol step 4): only rank 0's worker of the running generation may
// publish its 128-byte id, once per generation (the same bytes again are
// accepted); the other ranks fetch it, waiting in the NcclIdRelay (outside
// the state lock) until it is published, the generation ends, or their
// wait (capped at 300 s) runs out. A part of the Coordinator: it takes the
// state lock itself.
#ifndef LOCKSTEP_COORDINATOR_NCCL_BOOTSTRAP_H_
#define LOCKSTEP_COORDINATOR_NCCL_BOOTSTRAP_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/job_events.h"
#include "coordinator/job_table.h"
#include "coordinator/nccl_relay.h"
#include "proto/cluster.pb.h"

namespace lockstep {

class NcclBootstrap {
 public:
  using Job = JobTable::Job;

  // None of these is owned; `mu` guards jobs.
  NcclBootstrap(absl::Mutex& mu, JobTable& jobs, JobEvents& events,
                NcclIdRelay& nccl_ids)
      : mu_(mu), jobs_(jobs), events_(events), nccl_ids_(nccl_ids) {}

  // The services' PublishNcclId and FetchNcclId (coordinator.h, step 4).
  absl::Status PublishNcclId(const lockstep::v1::NcclIdRequest& req)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::string> FetchNcclId(
      const lockstep::v1::NcclIdRequest& req) ABSL_LOCKS_EXCLUDED(mu_);
  // A job read back from the journal: its running generation's published
  // id (journaled by PublishNcclId) is handed out again.
  void Republish(const Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How many FetchNcclId calls of `job` wait for its id now.
  int Waiting(const std::string& job) { return nccl_ids_.Waiting(job); }

 private:
  // The running generation `req` names, with the caller one of its ranks
  // (*rank set); errors say which of those fails.
  absl::StatusOr<Job*> NcclGeneration(const lockstep::v1::NcclIdRequest& req,
                                      int* rank)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex& mu_;
  JobTable& jobs_ ABSL_GUARDED_BY(mu_);
  JobEvents& events_;
  NcclIdRelay& nccl_ids_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_NCCL_BOOTSTRAP_H_
