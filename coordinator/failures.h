// Failures (coordinator.h, protocol steps 4 and 5; DESIGN "Failure and
// rejoin"): liveness (no heartbeat for worker_timeout_seconds), the chain
// of suspects a broken ring reports, hangs (who waits on whom), the
// straggler, lost members forgotten, and a generation's end with the
// restart policy (RECOVERING with back-off, a shrink, or FAILED). A part of
// the Coordinator, called under its state lock; its events go through
// JobEvents.
#ifndef LOCKSTEP_COORDINATOR_FAILURES_H_
#define LOCKSTEP_COORDINATOR_FAILURES_H_

#include <cstddef>
#include <string>

#include "absl/time/time.h"
#include "coordinator/coordinator_options.h"
#include "coordinator/gang_starts.h"
#include "coordinator/job_events.h"
#include "coordinator/job_table.h"
#include "coordinator/membership.h"
#include "coordinator/nccl_relay.h"

namespace lockstep {

// A reason in a status message, an event or the membership history is cut
// to about this many characters (the whole text goes to the log).
inline constexpr size_t kBriefReasonChars = 160;
// `text` as it is, or cut at a word near kBriefReasonChars, saying so.
std::string BriefReason(const std::string& text);

class Failures {
 public:
  using Worker = Membership::Worker;
  using Job = JobTable::Job;

  // None of these is owned.
  Failures(const CoordinatorOptions& options, Membership& members,
           JobTable& jobs, JobEvents& events, GangStarts& starts,
           NcclIdRelay& nccl_ids)
      : options_(options),
        members_(members),
        jobs_(jobs),
        events_(events),
        starts_(starts),
        nccl_ids_(nccl_ids) {}

  // Every ~100 ms (Coordinator::Tick): forgets long-lost members; marks
  // lost those silent for worker_timeout_seconds; per running job, the
  // suspects' chain, hangs, the straggler and a grow; a recovering job
  // past restart.replacement_timeout_seconds FAILED; then TryStartAll.
  void Check();
  // Drops the worker from the membership; its job (if any) recovers.
  void MarkLost(Worker& w, const std::string& why);
  // The job's generation is over because of `reason` (blaming `blamed`
  // when not null): RECOVERING, or FAILED once no restarts are left.
  // `planned`: workers left on purpose after a checkpoint of their last
  // step (SIGTERM: a node drain, a batch job cancelled or requeued): no
  // restart is counted and there is no back-off.
  // `regroup`: the ranks ended it together at a step boundary for workers
  // to join (planned, and the next generation starts from their memory).
  void Recover(Job& job, Worker* blamed, const std::string& reason,
               bool planned = false, bool regroup = false);
  // Marks the rank at the end of the job's chain of suspects lost (the
  // one that reported no suspect of its own, or none at all): at once with
  // two ranks, when that rank reported or is already lost, or `patience`
  // after the first suspicion (it may still report its own suspect).
  // True when it blamed someone (the job then recovers).
  bool BlameChain(Job& job, absl::Duration patience);
  // The member holding `rank` of the job's running generation, or null.
  Worker* RankWorker(const Job& job, int rank);

 private:
  absl::Time Now() const { return options_.time->Now(); }
  // Follows who waits for whom to the rank that waits on nothing: stalls
  // are events, and one past hang_timeout_seconds is lost.
  void DiagnoseHangs(Job& job);
  // Names the job's straggler (coordinator/straggler.h) from its ranks'
  // timings; an event when a new one is named.
  void UpdateStraggler(Job& job);
  // Drops workers lost lost_workers_listed_seconds ago that no job which
  // has not ended still ranks.
  void ForgetLostWorkers();

  const CoordinatorOptions& options_;
  Membership& members_;
  JobTable& jobs_;
  JobEvents& events_;
  GangStarts& starts_;
  NcclIdRelay& nccl_ids_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_FAILURES_H_
