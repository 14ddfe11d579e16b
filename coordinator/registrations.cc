// Registrations (see registrations.h): a worker's registration and its
// heartbeats, which carry its assignment and commands.
#include "coordinator/registrations.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "rpc/rpc_util.h"

namespace lockstep {

absl::StatusOr<lockstep::v1::RegisterResponse> Registrations::Register(
    const lockstep::v1::RegisterRequest& req, const std::string& peer) {
  if (req.protocol_version() != kProtocolVersion) {
    events_.Log(
        absl::StrFormat("refused worker %s pid %d (%s): protocol version %d",
                        req.host(), req.pid(), peer, req.protocol_version()));
    return absl::FailedPreconditionError(absl::StrFormat(
        "protocol version %d is not this coordinator's (%d): run the same "
        "lockstep release (%s) on workers and coordinator",
        req.protocol_version(), kProtocolVersion, req.version()));
  }
  if (req.replicas() < 1 || req.collective_address().empty()) {
    return absl::InvalidArgumentError(
        "a worker must offer >= 1 replica and a collective address");
  }
  absl::MutexLock lock(&mu_);
  std::string refusal;
  if (absl::Status s = members_.CheckName(req, peer, &refusal); !s.ok()) {
    events_.Log(refusal);
    return s;
  }
  Worker w = members_.NewMember(req);
  // One identity, one member: a process registering under a name that is
  // already a member replaces it (the old process restarted or re-joined),
  // so a job never holds the same worker twice.
  for (Worker* named : members_.LiveNamed(w.name)) {
    Worker& old = *named;
    if (old.lost) continue;  // lost by an earlier one's recovery
    const bool same_process =
        old.info.pid() == req.pid() && old.info.host() == req.host();
    if (!same_process) {
      old.replaced_by = absl::StrFormat("%s (pid %d)", w.id, req.pid());
    }
    failures_.MarkLost(
        old, same_process ? std::string("it registered again")
                          : absl::StrFormat("replaced by a new registration of "
                                            "\"%s\" (pid %d)",
                                            w.name, req.pid()));
  }
  events_.Log(
      absl::StrFormat("worker %s registered as \"%s\": %d replicas, "
                      "collective %s",
                      Membership::Describe(w), w.name, req.replicas(),
                      req.collective_address()));
  lockstep::v1::RegisterResponse resp;
  resp.set_worker_id(w.id);
  resp.set_heartbeat_interval_seconds(options_.heartbeat_interval_seconds);
  members_.Add(std::move(w));
  starts_.TryStartAll();
  events_.Persist();
  return resp;
}

absl::StatusOr<lockstep::v1::HeartbeatResponse> Registrations::Heartbeat(
    const lockstep::v1::HeartbeatRequest& req) {
  absl::MutexLock lock(&mu_);
  Worker* found = members_.Find(req.worker_id());
  if (found != nullptr && !found->replaced_by.empty()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "worker id \"%s\" was replaced by %s, a newer registration of the "
        "name \"%s\"; two processes must not share a --name",
        req.worker_id(), found->replaced_by, found->name));
  }
  if (found == nullptr || found->lost) {
    return absl::NotFoundError(absl::StrFormat(
        "worker id \"%s\" is not registered here", req.worker_id()));
  }
  Worker& w = *found;
  w.last_heartbeat = Now();
  w.wait = req.wait();
  w.wait_at = w.last_heartbeat;
  w.timing = req.timing();
  lockstep::v1::HeartbeatResponse resp;
  Job* job = w.job.empty() ? nullptr : jobs_.Find(w.job);
  const bool running =
      job != nullptr && job->status.state() == lockstep::v1::RUNNING;
  if (!req.job().empty()) {
    // The worker runs something: stop it unless it is its current part.
    if (!running || req.job() != w.job ||
        req.generation() != job->status.generation()) {
      resp.set_command(lockstep::v1::HeartbeatResponse::STOP);
      resp.mutable_assignment()->set_job(req.job());
      Job* its = jobs_.Find(req.job());
      resp.set_reason(its != nullptr && !its->status.message().empty()
                          ? its->status.message()
                          : "the job is no longer assigned to this worker");
    } else if (job->regroup_generation == req.generation()) {
      resp.set_regroup(true);  // workers join: end after the next step
    }
    return resp;
  }
  // A rank that already reported its end of this generation (a failure
  // whose blame is still being traced) is not started again: its report,
  // and what it kept in memory, stand.
  const bool reported = running && w.reported_job == job->name &&
                        w.reported_generation == job->status.generation();
  if (running && !job->finished.count(w.rank) && !reported) {
    resp.set_command(lockstep::v1::HeartbeatResponse::RUN);
    *resp.mutable_assignment() = starts_.AssignmentFor(*job, w.rank);
  } else if (job == nullptr || IsTerminal(job->status.state()) ||
             job->finished.count(w.rank)) {
    if (job != nullptr && IsTerminal(job->status.state())) {
      w.job.clear();  // idle again
      w.rank = -1;
    }
  }
  return resp;
}

}  // namespace lockstep
