// The coordinator's jobs (coordinator.h, protocol steps 2-6): each job's
// spec, state, ranks and recovery bookkeeping by name, and the order they
// were submitted in (the order of gang starts, lists and the journal).
// Owned by the Coordinator, under its state lock together with the
// members (a transition changes both), so not locked here.
#ifndef LOCKSTEP_COORDINATOR_JOB_TABLE_H_
#define LOCKSTEP_COORDINATOR_JOB_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/checkpoint_assembler.h"
#include "coordinator/job_reports.h"
#include "core/audit/sample_audit.h"
#include "core/checkpoint/checkpoint.h"
#include "core/job/job_spec.h"
#include "proto/cluster.pb.h"
#include "proto/jobs.pb.h"

namespace lockstep {

// NCCL_UNIQUE_ID_BYTES: the size of a published, journaled NCCL id.
inline constexpr size_t kNcclUniqueIdBytes = 128;

class JobTable {
 public:
  struct Job {
    std::string name;
    JobSpec spec;
    std::string job_json;
    lockstep::v1::JobStatus status;  // state, progress, message, results
    std::vector<std::string> ranks;  // worker ids in rank order
    int64_t start_step = 0;
    std::map<int64_t, std::map<int, std::string>> fingerprints;
    std::map<int, lockstep::v1::FinishRequest> finished;
    std::vector<std::string> events;
    int64_t version = 0;
    absl::Time submitted, started;
    // Recovery (DESIGN "Failure and rejoin").
    std::map<std::string, int> failures;  // by worker name
    absl::Time recovering_since, next_start;
    // Why the generation ended, in one short sentence (status, events,
    // membership; the whole text is in the coordinator's log).
    std::string lost_reason;
    // What a PENDING or RECOVERING job waits for, and until when at most
    // (InfiniteFuture: no bound): JobStatus.waiting_for/_seconds_left.
    std::string waiting_for;
    absl::Time waiting_until = absl::InfiniteFuture();
    // A failure with no restart left in an elastic job: the survivors go
    // on as a smaller world, no replacement is taken.
    bool shrink_only = false;
    // Idle workers an elastic job's regroup lets join (MaybeGrow).
    int64_t growing_by = 0;
    int64_t step_at_failure = 0;
    bool planned_recovery = false;  // see Recover's `planned`
    // The next generation waits (up to kSurvivorReportSeconds) for every
    // surviving rank's Finish: what it kept in memory.
    bool await_reports = false;
    // Elastic jobs: the generation asked to end at a step boundary so that
    // idle workers join (HeartbeatResponse.regroup); 0: none.
    int64_t regroup_generation = 0;
    // Ranks of the running generation that reported a broken or silent
    // neighbour: reporter -> (suspect, the report's text). With three or
    // more ranks a rank whose own upstream died aborts its streams too, so
    // the next rank suspects it: the blame follows the chain (BlameChain).
    std::map<int, std::pair<int, std::string>> suspects;
    absl::Time suspected_since;
    // Since when at least cluster.workers.min idle workers are there for
    // a pending elastic job (it then waits start_grace_seconds for more).
    absl::Time quorum_since = absl::InfiniteFuture();
    // The running generation starts from a survivor's memory (Assignment
    // memory_*): 0 when from start_step's checkpoint.
    int64_t memory_step = 0;
    int memory_donor = -1;
    std::string memory_fingerprint;
    // Sharded with copies: who sends each old rank's kept part
    // (Assignment.memory_part_donors); empty otherwise.
    std::vector<int> memory_part_donors;
    std::shared_ptr<CheckpointStore> checkpoints;
    std::shared_ptr<CheckpointAssembler> assembler;
    // Summaries, curves and checkpoint figures, under their own lock.
    std::shared_ptr<JobReports> reports;
    // STORAGE/jobs/NAME/audit.jsonl when the job audits its samples.
    std::shared_ptr<AuditLog> audit;
    // The running generation's collective: "ring" or "nccl".
    std::string collective;
    // The running generation's NCCL unique id once rank 0 published it
    // (kNcclUniqueIdBytes; journaled; cleared when a generation starts).
    std::string nccl_id;
    // The rank holding the running generation back (no text: none), and
    // the last one an event named (generation/rank/cause).
    lockstep::v1::Straggler straggler;
    std::string straggler_logged;
  };

  // The job named `name`, or null.
  Job* Find(const std::string& name);
  const Job* Find(const std::string& name) const;
  // The job named `name`, or NotFound `no job named "NAME"`.
  absl::StatusOr<Job*> Get(const std::string& name);
  absl::StatusOr<const Job*> Get(const std::string& name) const;
  // Adds `job`, or replaces the job of its name, which keeps its place in
  // the submission order.
  Job& Put(std::unique_ptr<Job> job);
  // Every job in submission order.
  std::vector<Job*> InOrder();
  std::vector<const Job*> InOrder() const;
  // How many jobs are in `state`.
  int Count(lockstep::v1::JobState state) const;
  // The worker ids ranked by a job that has not ended.
  std::set<std::string> RankedWorkers() const;

 private:
  std::map<std::string, std::unique_ptr<Job>> jobs_;
  std::vector<std::string> order_;  // submission order
};

// InvalidArgument, naming it, unless `rank` is one of the running
// generation's and `worker_id` holds it: `what` ("a finish report") came
// from a confused or hostile worker.
absl::Status CheckReporter(const JobTable::Job& job, int rank,
                           const std::string& worker_id, const char* what);

// "RUNNING", ... for a state; ended: SUCCEEDED, FAILED or CANCELLED.
const char* JobStateName(lockstep::v1::JobState state);
bool IsTerminal(lockstep::v1::JobState state);

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_JOB_TABLE_H_
