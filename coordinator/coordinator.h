// The chief's state machine (DESIGN "A job", "Processes"): jobs and their
// states, worker membership and ranks, gang starts, liveness, fingerprint
// comparison, checkpoint commits from worker slices, summaries and
// result.json. Thread-safe; the gRPC services (coordinator/services.h) are
// thin adapters over it. Never on the per-step gradient path.
//
// Its parts, each a class over the state it owns or shares:
//   Membership (membership.h)      the workers by id, identity, waits
//   JobTable (job_table.h)         the jobs by name, submission order
//   StateJournal (state_journal.h) both as a Journal in a JournalStore
//   GangStarts (gang_starts.h)     step 3: who takes a job's ranks, from where
//   Failures (failures.h)          steps 4-5: liveness, suspects, hangs,
//                                  stragglers, a generation's end, restarts
//   RankReports (rank_reports.h)   steps 4-6: progress, samples, Finish,
//                                  fingerprints, result.json
//   CheckpointCommits (checkpoint_commits.h), NcclBootstrap
//   (nccl_bootstrap.h)             step 4: slices committed; NCCL ids
//   JobViews (job_views.h)         snapshots, lists, watches, /metrics
//   Registrations (registrations.h) step 1: registration, heartbeats
//   Submissions (submissions.h)    step 2: submission, cancel, job files
// The Coordinator owns them and the state lock mu_ (one state machine: a
// transition changes members and jobs together and is journaled as one;
// what has its own lock keeps it: JobReports, AuditLog, the
// CheckpointAssembler, the NcclIdRelay, the JournalStore). It wires them,
// implements JobEvents (job_events.h: Event, Changed, EndJob, Persist,
// Log, Fenced), through which the parts report (step 6, a job's end, is
// its EndJob), and runs the lifecycle: the journal's load (step 7), the
// shutdown, the tick. The services call the parts through its accessors
// (submissions(), views(), registrations(), reports(), checkpoints(),
// nccl()).
//
// The coordinator <-> worker protocol (proto/cluster.proto), in the order
// of a job's life. All state is under mu_. A transition changes the state
// in memory and then journals it (Persist: StateJournal::Write), mostly
// through Event(), before mu_ is released, so no RPC sees a transition
// that is not journaled. A failed journal write is only logged. [W] marks
// a state-changing decision or write that a leader lease must fence.
//
// 1. Membership (Registrations, registrations.h; Membership).
//    Register: FailedPrecondition unless protocol_version is the
//    coordinator's; InvalidArgument without a replica or a
//    collective_address. The worker gets a new id "wN" (N: registration
//    order, also rank order). Its name (default: the collective address)
//    is its identity: a live member with the same name is MarkLost (its
//    job recovers); its replaced_by is set when it is another pid or
//    host. Another process that started before that member is refused
//    instead (started_unix_micros: an old process heard again does not
//    take its name back). held_* is what a dropped worker kept in memory
//    (Worker::Hold).
//    Then TryStartAll, [W] Persist.
//    Heartbeat: NotFound for an unknown or lost id (the worker stops its
//    run, keeps its state, registers again offering it);
//    FailedPrecondition for a replaced id (the daemon exits; there is no
//    exit command). It carries job, generation, wait and timing. The
//    response: STOP when the worker runs anything but its current
//    RUNNING job and generation; regroup=true when that generation is to
//    end for a grow; RUN with AssignmentFor(job, rank) to an idle worker
//    TryStart gave a rank, at every heartbeat until it runs it, unless
//    that rank already sent a Finish of this generation. Not journaled.
//
// 2. Submission (Submissions, submissions.h; submit_policy.cc
//    DecideSubmit).
//    UNAVAILABLE after BeginShutdown. The same spec again returns the
//    name's job (SubmitResponse.existing); another spec while it has not
//    ended is AlreadyExists. Another spec of an ended job, or
//    checkpoints of a name it has no job for, need SUBMIT_RESUME (same
//    model) or SUBMIT_RESTART ([W] MoveJobResultsAside). The new Job is
//    PENDING and keeps the name's generation count; [W] OpenJobFiles,
//    [W] Event "submitted", then TryStart.
//
// 3. Gang start (GangStarts::TryStart; from Submit, Register,
//    late Finish reports and Tick through TryStartAll: RECOVERING jobs
//    first, then PENDING in submit order; none while shutting down).
//    IdleFor: not lost, no job, Offers (replicas; GPUs for "nccl"), not
//    Excluded (blamed >= kFailuresBeforeExclusion times), registration
//    order. WorldToStart: cluster.workers, or for an elastic job >= min
//    after start_grace / rejoin_grace (shrink_only: survivors at once).
//    RECOVERING also waits for next_start (back-off) and, with
//    await_reports, up to kSurvivorReportSeconds for each old rank still
//    a member to send its Finish (what it kept).
//    ChooseStart (GangStarts): start_step is the latest good
//    checkpoint (CheckpointStore::LoadLatest, under mu_) or, recovering,
//    a later step an idle worker holds of this job and generation:
//    memory_step/donor/fingerprint, or memory_part_donors from
//    PlanKeptParts (sharded with copies).
//    Then [W]: ranks = the first `world` idle workers, collective "ring"
//    or "nccl", generation g+1, RUNNING, restarts+1 unless a grow, a
//    planned leave or an elastic shrink, a MembershipChange,
//    [W] AuditLog::Generation, [W] Event "RUNNING generation g+1".
//    The Assignment (job_json, generation, rank, peers, start_step,
//    memory_*, collective) reaches each rank as RUN in its next idle
//    heartbeat (a survivor still running g gets STOP first). It restores
//    from memory (its own, or WorkerState.FetchState from the donors) or
//    FetchCheckpoint (LoadCheckpoint: the start_step folder, verified,
//    whatever was committed since).
//
// 4. During generation g. Each worker request names (job, generation).
//    Another generation is counted (Fenced: "progress", "samples",
//    "checkpoint_slice", "finish", "nccl_id") and refused; the current
//    one while not RUNNING is refused uncounted. CheckReporter (rank in
//    range, ranks[rank] == worker_id) guards progress, sample records,
//    checkpoint slices and Finish.
//    ReportProgress (RankReports): stop=true when over. Rank 0
//    sends step, loss, ..., events ([W] Event each) and scalars ([W]
//    JobReports::Add, outside mu_); every rank sends a fingerprint each
//    fingerprint_every_steps and at the last step; CompareFingerprints,
//    once all ranks' are in: a mismatch is EndJob FAILED.
//    RecordSamples (audit.samples), before each step's collective:
//    [W] AuditLog::Add, outside mu_; stop=true when over.
//    UploadCheckpoint -> AddCheckpointSlice (checkpoint_commits.h):
//    generation, RUNNING and the sender checked under mu_; then, outside mu_,
//    CheckpointAssembler::Add verifies and, at a step's last slice,
//    [W] CheckpointStore::Commit (temp folder, fsync, rename, `latest`);
//    then [W] Event "committed". A failed commit of the final checkpoint
//    (slice.final) ends the generation: Recover, nobody blamed.
//    PublishNcclId / FetchNcclId (nccl_bootstrap.h): rank 0's 128
//    bytes, once per generation, in the NcclIdRelay (memory only); the
//    others wait up to 300 s, or until Recover / EndJob ends it.
//    Tick (~100 ms, Failures::Check): ForgetLostWorkers ([W]
//    Persist); no heartbeat for worker_timeout_seconds: MarkLost;
//    BlameChain; DiagnoseHangs follows heartbeat waits to the rank that
//    waits on nothing (MarkLost after hang_timeout_seconds);
//    UpdateStraggler; MaybeGrow (regroup_generation); each an [W] Event.
//
// 5. End of a generation (RankReports::Finish; Failures::Recover).
//    A Finish naming the current generation number of a job not ended
//    (RUNNING, or RECOVERING) from the worker that held its rank first
//    records reported_* and Hold (held_step, held_fingerprint, held
//    parts). A generation that is over gets FinishResponse.over (a
//    RECOVERING job tries TryStart); a leave while idle or late marks
//    the worker lost, [W] Persist. For
//    the running generation, after CheckReporter:
//    - no error: finished[rank], fingerprint compared, CompleteIfDone.
//    - regroup (only when regroup_generation == g): Recover(regroup).
//    - leaving (SIGTERM drain): worker lost, Recover(planned).
//    - suspect_ranks: suspects[rank]; BlameChain MarkLosts the chain's
//      end at once with 2 ranks, else once it reported or after 1 s.
//    - other errors: Unavailable, DeadlineExceeded, Aborted, Cancelled,
//      ResourceExhausted, Internal, Unknown are ignored while suspects
//      are traced (consequences), else Recover blaming the reporter;
//      any other code (the job's own error) is EndJob FAILED.
//    MarkLost: lost, then Recover of its RUNNING job, else [W] Persist.
//    Recover (RUNNING only) [W]: failures[blamed name]++, every rank's
//    worker idle (STOP at its next heartbeat). Planned or regroup:
//    RECOVERING, no back-off. Else FAILED if restarts >= max_restarts
//    and no elastic shrink is possible; else RECOVERING with back-off
//    min(60, backoff_seconds * 2^restarts), 0 when shrink_only. The
//    generation number stays g until TryStart. [W] Event.
//    Tick: RECOVERING past replacement_timeout_seconds is FAILED.
//    Workers (job_runner.cc): a failed run keeps its state (KeepState).
//    A drain or a regroup is agreed in a step's loss all-reduce; a drain
//    checkpoints that step behind a barrier before Finish(leaving).
//
// 6. End of a job (Coordinator::EndJob; RankReports' CompleteIfDone).
//    SUCCEEDED once every rank's Finish is in: [W] WriteResultFile
//    (result.json from rank 0's report and the membership), then EndJob;
//    a failed write is FAILED. FAILED and CANCELLED (Cancel) also go
//    through EndJob: NCCL wait ended, workers idle (STOP at the next
//    heartbeat), [W] JobReports::Flush, [W] Event.
//
// 7. The coordinator's restart (coordinator_journal.cc, StateJournal;
//    server.cc).
//    The journal (journal.proto; FileJournalStore: journal.pb, replaced
//    atomically) holds the sequence, next_worker, live workers (id,
//    RegisterRequest, order, job, rank) and every job (job_json, status,
//    ranks, start_step, collective, failures, back-off, planned_recovery,
//    the last 500 events, the finished ranks' reports, the memory start
//    and the regroup asked). Not in it: progress, the fingerprints of
//    ranks not finished, held_*, reported_*, suspects, await_reports,
//    shrink_only, replaced_by, NCCL ids.
//    LoadJournal runs before any RPC is answered (UNAVAILABLE till then):
//    each worker has worker_timeout_seconds from now to heartbeat under
//    its id; a RECOVERING job's replacement wait restarts; [W] Persist.
//    Meanwhile the ranks train on (progress reports wait); sample
//    records, the final checkpoint and Finish retry up to 10 min
//    (ClusterHost::WhileCoordinatorRestarts): with the audit on, the
//    ranks wait at their next sample record. SaveJournal at shutdown.
//
// 8. Leadership (--etcd; server.cc, leader_lease.h, etcd_journal_store.h).
//    Several coordinators share the storage; each holds an etcd lease
//    (TTL 2 s) and campaigns: create PREFIX/leader (its address) under its
//    lease if absent. A standby answers every call UNAVAILABLE
//    (NotServing: kNotLeaderPrefix, naming the leader), health
//    NOT_SERVING, and polls the key. The one that created it leads (term
//    = the key's create_revision): LoadJournal from etcd, then as above.
//    Every Persist is an etcd transaction compared on create_revision ==
//    term, so etcd refuses a deposed leader's write; it does not even try
//    once its lease may have lapsed (no keep-alive answered for the TTL).
//    A refused write (counted) makes NotServing non-empty: the answer of
//    the call that made it is replaced by UNAVAILABLE (services.cc
//    Answer), and the server exits at once (step down); its supervisor
//    starts it again as a standby. Workers and clients given several
//    addresses go on to the next after UNAVAILABLE or DEADLINE_EXCEEDED.
//
// Writes done before the Persist that records them, or outside mu_: the
// checkpoint commit, result.json, audit.jsonl, summaries, the results
// moved aside. A lease checked in Persist alone does not fence them.
#ifndef LOCKSTEP_COORDINATOR_COORDINATOR_H_
#define LOCKSTEP_COORDINATOR_COORDINATOR_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/time_source.h"
#include "coordinator/checkpoint_assembler.h"
#include "coordinator/checkpoint_commits.h"
#include "coordinator/coordinator_options.h"
#include "coordinator/failures.h"
#include "coordinator/gang_starts.h"
#include "coordinator/job_events.h"
#include "coordinator/job_reports.h"
#include "coordinator/job_table.h"
#include "coordinator/job_views.h"
#include "coordinator/journal_store.h"
#include "coordinator/membership.h"
#include "coordinator/nccl_bootstrap.h"
#include "coordinator/nccl_relay.h"
#include "coordinator/rank_reports.h"
#include "coordinator/registrations.h"
#include "coordinator/state_journal.h"
#include "coordinator/submissions.h"
#include "coordinator/submit_policy.h"
#include "core/audit/sample_audit.h"
#include "core/checkpoint/checkpoint.h"
#include "core/job/job_spec.h"
#include "core/log.h"
#include "proto/cluster.pb.h"
#include "proto/jobs.pb.h"

namespace lockstep {

class Coordinator : private JobEvents {
 public:
  explicit Coordinator(CoordinatorOptions options);

  // Reads the journal a previous coordinator left on the same storage (none
  // is fine): its jobs resume, its workers may heartbeat again under their
  // ids. DataLoss naming the file when it is damaged.
  absl::Status LoadJournal();
  // Writes the journal now (at shutdown).
  absl::Status SaveJournal();
  // Where the journal is (Where(): the file's path for the file store) and
  // the journal writes it refused because this coordinator no longer led
  // (refused_writes()). Thread-safe.
  const JournalStore& journal_store() const { return journal_.store(); }
  // True once LoadJournal succeeded: the services answer only then.
  bool ready() const { return ready_.load(); }
  // "" while the services may answer: the journal is replayed and this
  // coordinator leads (always, without etcd). Else why not, for an
  // UNAVAILABLE ("not the leader: a standby; the leader is HOST:PORT
  // (term 12)", kNotLeaderPrefix): the callers retry, or go to the
  // leader.
  std::string NotServing() const;
  // The shutdown has begun: Submit answers UNAVAILABLE and no generation
  // starts, while the workers of jobs still RUNNING may drain (checkpoint
  // and leave) through this coordinator.
  void BeginShutdown();
  // Liveness and gang starts; called every ~100 ms by the server.
  void Tick();

  // For /metrics and the dashboard: every job's view with its curves and
  // checkpoint figures, and the workers (JobViews), with whether this
  // coordinator serves.
  using Curves = JobViews::Curves;
  using CheckpointFigures = JobViews::CheckpointFigures;
  using JobView = JobViews::JobView;
  using OpsView = JobViews::OpsView;
  OpsView Ops() const;

  // The parts the services call (each takes the state lock itself):
  // the job service's Submit and Cancel (step 2),
  Submissions& submissions() { return submissions_; }
  // its Get, List, WaitForChange (and RunningJobs, for the shutdown),
  const JobViews& views() const { return views_; }
  // the coordinator service's Register and Heartbeat (step 1),
  Registrations& registrations() { return registrations_; }
  // ReportProgress, RecordSamples and Finish (steps 4-6),
  RankReports& reports() { return reports_; }
  // AddCheckpointSlice and LoadCheckpoint (step 4),
  CheckpointCommits& checkpoints() { return checkpoints_; }
  // PublishNcclId, FetchNcclId (step 4) and Waiting.
  NcclBootstrap& nccl() { return nccl_; }

 private:
  using Worker = Membership::Worker;
  using Job = JobTable::Job;

  absl::Time Now() const { return options_.time->Now(); }
  // "not the leader: ..." when the journal store says this coordinator
  // may not write (a standby, or a lapsed lease); "" otherwise.
  std::string NotLeading() const;
  // JobEvents, for the parts (GangStarts, Failures, RankReports).
  void Log(const LogRecord& record) const override {
    if (options_.log) options_.log(record);
  }
  void Event(Job& job, const std::string& line) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Changed(Job& job) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndJob(Job& job, lockstep::v1::JobState state,
              const std::string& message) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the journal (logs a failure; the state stays in memory).
  void Persist() override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CoordinatorOptions options_;
  // Its sequence changes under mu_ (Write, Read); its store is
  // thread-safe (journal_store() and NotLeading read it without mu_).
  StateJournal journal_;
  mutable absl::Mutex mu_;
  mutable absl::CondVar changed_;
  // One state machine's state: a transition changes members and jobs
  // together, and is journaled as one.
  Membership members_ ABSL_GUARDED_BY(mu_);
  JobTable jobs_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> ready_{false};
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  NcclIdRelay nccl_ids_;
  // The parts (under mu_), over members_ and jobs_.
  GangStarts starts_ ABSL_GUARDED_BY(mu_);
  Failures failures_ ABSL_GUARDED_BY(mu_);
  // These take mu_ themselves.
  JobViews views_;
  Registrations registrations_;
  Submissions submissions_;
  RankReports reports_;
  CheckpointCommits checkpoints_;
  NcclBootstrap nccl_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_COORDINATOR_H_
