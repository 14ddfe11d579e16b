// The chief's state machine (see coordinator.h): submissions and cancels,
// a job's end, the JobEvents steps, and the entry points of the parts;
// registration and heartbeats are in coordinator_members.cc.
#include "coordinator/coordinator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "coordinator/job_files.h"
#include "core/checkpoint/checkpoint_layout.h"
#include "core/train/local_training.h"
#include "core/train/result_file.h"
#include "rpc/rpc_util.h"

namespace lockstep {

using lockstep::v1::JobState;
using lockstep::v1::JobStatus;

Coordinator::Coordinator(CoordinatorOptions options)
    : options_(std::move(options)),
      journal_(options_.journal_store != nullptr
                   ? options_.journal_store
                   : std::make_shared<FileJournalStore>(options_.storage_dir)),
      members_(options_.time),
      starts_(members_, jobs_, *this, options_.time, shutting_down_),
      failures_(options_, members_, jobs_, *this, starts_, nccl_ids_),
      views_(options_, mu_, changed_, members_, jobs_),
      reports_(options_, mu_, members_, jobs_, *this, starts_, failures_),
      checkpoints_(mu_, jobs_, *this, failures_,
                   [this] { return NotLeading(); }),
      nccl_(mu_, jobs_, *this, nccl_ids_) {}

absl::StatusOr<lockstep::v1::ReportResponse> Coordinator::ReportProgress(
    const lockstep::v1::ProgressReport& report) {
  return reports_.ReportProgress(report);
}

absl::StatusOr<lockstep::v1::ReportResponse> Coordinator::RecordSamples(
    const lockstep::v1::SampleRecord& record) {
  return reports_.RecordSamples(record);
}

absl::Status Coordinator::Finish(const lockstep::v1::FinishRequest& req,
                                 std::string* over) {
  return reports_.Finish(req, over);
}

absl::StatusOr<lockstep::v1::CheckpointAck> Coordinator::AddCheckpointSlice(
    const std::vector<lockstep::v1::CheckpointSlice>& messages) {
  return checkpoints_.AddCheckpointSlice(messages);
}

absl::StatusOr<LoadedCheckpoint> Coordinator::LoadCheckpoint(
    const std::string& job, int64_t step) const {
  return checkpoints_.LoadCheckpoint(job, step);
}

absl::Status Coordinator::PublishNcclId(
    const lockstep::v1::NcclIdRequest& req) {
  return nccl_.PublishNcclId(req);
}

absl::StatusOr<std::string> Coordinator::FetchNcclId(
    const lockstep::v1::NcclIdRequest& req) {
  return nccl_.FetchNcclId(req);
}

int Coordinator::RunningJobs() const { return views_.RunningJobs(); }

absl::StatusOr<JobStatus> Coordinator::Get(const std::string& name) const {
  return views_.Get(name);
}

lockstep::v1::ListJobsResponse Coordinator::List() const {
  return views_.List();
}

absl::StatusOr<JobStatus> Coordinator::WaitForChange(
    const std::string& name, int64_t* version, int64_t* events_seen,
    absl::Time deadline) const {
  return views_.WaitForChange(name, version, events_seen, deadline);
}

Coordinator::OpsView Coordinator::Ops() const {
  OpsView v = views_.Ops();
  v.not_serving = NotServing();
  v.refused_journal_writes = RefusedJournalWrites();
  return v;
}

void Coordinator::Tick() {
  absl::MutexLock lock(&mu_);
  failures_.Check();
}

absl::Status Coordinator::OpenJobFiles(Job& job) {
  const std::string job_dir =
      JoinPath(JoinPath(options_.storage_dir, "jobs"), job.name);
  job.status.set_storage_path(job_dir);
  job.status.set_storage_id(options_.storage_id);
  job.checkpoints = std::make_shared<CheckpointStore>(
      JoinPath(job_dir, "checkpoints"), job.spec.checkpoint.keep);
  job.assembler = std::make_shared<CheckpointAssembler>(job.checkpoints);
  ASSIGN_OR_RETURN(job.reports,
                   JobReports::Open(JoinPath(job_dir, "summaries"),
                                    job.spec.summary.every_steps == 0));
  if (job.spec.audit.samples) {
    ASSIGN_OR_RETURN(
        job.audit, AuditLog::Open(JoinPath(job_dir, "audit.jsonl"), job.spec));
  }
  return absl::OkStatus();
}

void Coordinator::Changed(Job& job) {
  ++job.version;
  changed_.SignalAll();
}

// Every job transition ends with an event, so this is where the journal is
// written for them.
void Coordinator::Event(Job& job, const std::string& line) {
  job.events.push_back(line);
  LogRecord r(line);
  r.job = job.name;
  r.generation = job.status.generation();
  if (job.status.step() > 0) r.step = job.status.step();
  Log(r);
  Changed(job);
  // Events are journaled too, so a watch resumed after a coordinator
  // restart continues at the right one.
  Persist();
}

absl::StatusOr<JobStatus> Coordinator::Submit(const std::string& job_json,
                                              SubmitMode mode, bool* existing) {
  if (existing != nullptr) *existing = false;
  ASSIGN_OR_RETURN(JobSpec spec, ParseJobSpec(job_json));
  const std::string job_dir =
      JoinPath(JoinPath(options_.storage_dir, "jobs"), spec.name);
  RETURN_IF_ERROR(
      AnnotateStatus(MakeDirs(JoinPath(job_dir, "checkpoints")), "--storage"));
  const std::vector<std::string> steps =
      CheckpointStore(JoinPath(job_dir, "checkpoints"), 0).ListSteps();
  const int64_t latest_checkpoint =
      steps.empty() ? -1 : checkpoint_layout::ParseStepName(steps.back());
  absl::MutexLock lock(&mu_);
  if (shutting_down_) {
    return absl::UnavailableError(
        "the coordinator is shutting down; submit again once it is back");
  }
  Job* old = jobs_.Find(spec.name);
  PriorJob prior;
  if (old != nullptr) {
    prior.spec = &old->spec;
    prior.state = JobStateName(old->status.state());
    prior.ended = IsTerminal(old->status.state());
    prior.step = old->status.step();
  }
  ASSIGN_OR_RETURN(
      SubmitAction action,
      DecideSubmit(spec, mode, old ? &prior : nullptr, latest_checkpoint));
  if (action == SubmitAction::kReturnExisting) {
    if (existing != nullptr) *existing = true;
    return views_.Snapshot(*old);
  }
  std::string how;
  if (action == SubmitAction::kRestart) {
    absl::StatusOr<std::string> aside = MoveJobResultsAside(job_dir);
    if (!aside.ok()) return AnnotateStatus(aside.status(), "--restart");
    RETURN_IF_ERROR(AnnotateStatus(MakeDirs(JoinPath(job_dir, "checkpoints")),
                                   "--storage"));
    how = aside->empty() ? "; --restart: nothing earlier to move aside"
                         : absl::StrCat(
                               "; --restart: the earlier results were "
                               "moved to ",
                               *aside);
  } else if (action == SubmitAction::kResume) {
    how = absl::StrFormat("; --resume: from its checkpoint at step %d",
                          latest_checkpoint);
  }
  auto job = std::make_unique<Job>();
  // Generations keep counting across resubmissions of a name, so nothing
  // left over from an earlier run can pass for the new one.
  if (Job* old = jobs_.Find(spec.name); old != nullptr) {
    job->status.set_generation(old->status.generation());
  }
  job->name = spec.name;
  job->job_json = JobSpecToJson(spec);
  job->spec = std::move(spec);
  job->submitted = Now();
  job->status.set_name(job->name);
  job->status.set_state(lockstep::v1::PENDING);
  job->status.set_workers_needed(
      static_cast<int32_t>(job->spec.cluster.workers));
  job->status.set_submitted_unix_seconds(absl::ToUnixMicros(job->submitted) /
                                         1e6);
  job->status.set_eta_seconds(-1);
  job->status.set_max_restarts(
      static_cast<int32_t>(job->spec.restart.max_restarts));
  job->status.set_shard(job->spec.cluster.shard == ShardMode::kNone
                            ? ""
                            : ShardModeName(job->spec.cluster.shard));
  job->status.set_shard_copies(job->spec.cluster.shard != ShardMode::kNone &&
                               job->spec.cluster.copies);
  RETURN_IF_ERROR(OpenJobFiles(*job));
  Job& ref = jobs_.Put(std::move(job));
  ref.status.set_message(starts_.PendingReason(ref));
  const ClusterSpec& c = ref.spec.cluster;
  Event(ref, absl::StrFormat(
                 "submitted: %s workers x %d replicas, batch %d "
                 "per replica%s%s%s",
                 ref.spec.elastic()
                     ? absl::StrFormat("%d-%d", c.min_workers, c.workers)
                     : absl::StrCat(c.workers),
                 ref.spec.cluster.replicas_per_worker,
                 ref.spec.batch_size_per_replica, AccumulationNote(ref.spec),
                 ref.spec.elastic()
                     ? absl::StrFormat("; elastic: global batch %d whatever "
                                       "the world",
                                       ref.spec.global_batch_size())
                     : "",
                 how));
  if (c.shard != ShardMode::kNone && c.copies &&
      (c.workers == 2 || c.min_workers == 2)) {
    Event(ref,
          "note: cluster.copies: on 2 workers each keeps its part of the "
          "optimizer state and the other's, the whole state, so sharding "
          "saves no memory there (\"copies\": false keeps 1/2 on each; a "
          "lost worker then means the latest checkpoint)");
  }
  starts_.TryStart(ref);  // the events journal both transitions
  return views_.Snapshot(ref);
}

void Coordinator::BeginShutdown() {
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
}

absl::StatusOr<JobStatus> Coordinator::Cancel(const std::string& name) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Job * job, jobs_.Get(name));
  if (!IsTerminal(job->status.state())) {
    EndJob(*job, lockstep::v1::CANCELLED,
           absl::StrFormat("cancelled at step %d", job->status.step()));
    starts_.TryStartAll();
  }
  return views_.Snapshot(*job);
}

void Coordinator::EndJob(Job& job, JobState state, const std::string& message) {
  if (IsTerminal(job.status.state())) return;
  nccl_ids_.EndGeneration(job.name, job.status.generation());
  // Its workers are free for other jobs; one still running it gets STOP
  // at its next heartbeat (its job is no longer its assignment).
  members_.Release(job.name, job.ranks);
  job.status.set_state(state);
  job.status.set_message(message);
  job.status.set_wall_seconds(absl::ToDoubleSeconds(Now() - job.submitted));
  if (job.reports != nullptr) {
    absl::Status s = job.reports->Flush();
    if (!s.ok()) Log(std::string(s.message()));
  }
  Event(job, absl::StrCat(JobStateName(state), message.empty() ? "" : ": ",
                          message));
}

}  // namespace lockstep
