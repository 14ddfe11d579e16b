// Protocol step 1 (coordinator.h): a worker's registration (its protocol
// version, its name as its identity, the member it replaces) and its
// heartbeats, which carry its assignment and the commands STOP, RUN and
// regroup. A part of the Coordinator: it takes the state lock itself.
#ifndef LOCKSTEP_COORDINATOR_REGISTRATIONS_H_
#define LOCKSTEP_COORDINATOR_REGISTRATIONS_H_

#include <string>

#include "absl/base/thread_annotations.h"
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

class Registrations {
 public:
  using Worker = Membership::Worker;
  using Job = JobTable::Job;

  // None of these is owned; `mu` guards members, jobs and the other parts.
  Registrations(const CoordinatorOptions& options, absl::Mutex& mu,
                Membership& members, JobTable& jobs, JobEvents& events,
                GangStarts& starts, Failures& failures)
      : options_(options),
        mu_(mu),
        members_(members),
        jobs_(jobs),
        events_(events),
        starts_(starts),
        failures_(failures) {}

  // A new member "wN" (`peer`: the caller's address, for the log);
  // FailedPrecondition for another protocol version or a name another
  // process holds, InvalidArgument without a replica or an address.
  absl::StatusOr<lockstep::v1::RegisterResponse> Register(
      const lockstep::v1::RegisterRequest& req, const std::string& peer)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A member's liveness, wait and timing; the answer is its command.
  // NotFound for an unknown or lost id, FailedPrecondition for a replaced
  // one.
  absl::StatusOr<lockstep::v1::HeartbeatResponse> Heartbeat(
      const lockstep::v1::HeartbeatRequest& req) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Time Now() const { return options_.time->Now(); }

  const CoordinatorOptions& options_;
  absl::Mutex& mu_;
  Membership& members_ ABSL_GUARDED_BY(mu_);
  JobTable& jobs_ ABSL_GUARDED_BY(mu_);
  JobEvents& events_;
  GangStarts& starts_ ABSL_GUARDED_BY(mu_);
  Failures& failures_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_REGISTRATIONS_H_
