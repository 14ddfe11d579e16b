// Gang starts (coordinator.h, protocol step 3): which idle members take a
// pending or recovering job's ranks, from which step (the latest
// checkpoint or what the survivors kept in memory), what each rank is told
// (its Assignment), why a job still waits, and when a running elastic job
// asks to grow. A part of the Coordinator, called under its state lock;
// its events go through JobEvents.
#ifndef LOCKSTEP_COORDINATOR_GANG_STARTS_H_
#define LOCKSTEP_COORDINATOR_GANG_STARTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "base/time_source.h"
#include "coordinator/job_events.h"
#include "coordinator/job_table.h"
#include "coordinator/membership.h"
#include "proto/cluster.pb.h"

namespace lockstep {

// A worker name blamed for this many failures of one job is not handed that
// job again (no restart loops on a bad machine).
inline constexpr int kFailuresBeforeExclusion = 2;
// A recovering job waits up to this long for the surviving ranks' Finish
// reports (what they kept in memory) before it starts from the latest
// checkpoint without them.
inline constexpr double kSurvivorReportSeconds = 5;

class GangStarts {
 public:
  using Worker = Membership::Worker;
  using Job = JobTable::Job;

  // None of these is owned; `shutting_down` is the Coordinator's flag (no
  // generation starts once it is set).
  GangStarts(Membership& members, JobTable& jobs, JobEvents& events,
             const TimeSource* time, const bool& shutting_down)
      : members_(members),
        jobs_(jobs),
        events_(events),
        time_(time),
        shutting_down_(shutting_down) {}

  // TryStart for every RECOVERING job, then every PENDING one, in
  // submission order (recovering jobs keep the workers they need).
  void TryStartAll();
  // Starts the job's next generation when it can (submission order, the
  // world to start, the back-off, the survivors' reports); else sets what
  // it waits for. True when it started.
  bool TryStart(Job& job);
  // A running elastic job below its max asks its generation to end at the
  // next step boundary when idle workers could join it (and no other job
  // waits for workers).
  void MaybeGrow(Job& job);
  // Why a job waits, in one sentence ("waiting for workers: ...", "queued
  // behind job ...").
  std::string PendingReason(const Job& job) const;
  // The oldest PENDING job submitted before `job`, which starts first;
  // null when none.
  const Job* PendingAhead(const Job& job) const;
  // What rank `rank` of the running generation is told.
  lockstep::v1::Assignment AssignmentFor(const Job& job, int rank) const;

 private:
  absl::Time Now() const { return time_->Now(); }
  // Where the generation TryStart starts on `idle` (the next ranks in
  // order) begins: job.start_step and memory_* from the latest checkpoint
  // or, `recovering`, from what the survivors kept in memory (whole, or
  // parts planned by PlanKeptParts). Returns the latest checkpoint's step.
  int64_t ChooseStart(Job& job, const std::vector<Worker*>& idle,
                      bool recovering);
  // How many of `available` qualifying idle workers `job` starts with now
  // (0: it waits): its cluster.workers, or for an elastic job at least
  // its min once the start or rejoin grace is over (sets quorum_since).
  int64_t WorldToStart(Job& job, int64_t available, absl::Time now);
  // The idle workers that could take a rank of `job`, registration order.
  std::vector<Worker*> IdleFor(const Job& job);
  // Offers what one rank of `job` needs: replicas_per_worker replicas, and
  // as many GPUs when the job asks for "nccl".
  static bool Offers(const Job& job, const Worker& w);
  // Blamed for kFailuresBeforeExclusion failures of the job.
  static bool Excluded(const Job& job, const Worker& w);

  Membership& members_;
  JobTable& jobs_;
  JobEvents& events_;
  const TimeSource* const time_;
  const bool& shutting_down_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_GANG_STARTS_H_
