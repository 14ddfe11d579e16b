// Submissions (see submissions.h): a job's submission and cancel, and the
// files it keeps on the storage.
#include "coordinator/submissions.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "coordinator/checkpoint_assembler.h"
#include "coordinator/job_files.h"
#include "coordinator/job_reports.h"
#include "core/audit/sample_audit.h"
#include "core/checkpoint/checkpoint.h"
#include "core/checkpoint/checkpoint_layout.h"
#include "core/job/job_spec.h"
#include "core/train/local_training.h"

namespace lockstep {

using lockstep::v1::JobStatus;

absl::StatusOr<JobStatus> Submissions::Submit(const std::string& job_json,
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
  events_.Event(ref,
                absl::StrFormat(
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
    events_.Event(
        ref,
        "note: cluster.copies: on 2 workers each keeps its part of the "
        "optimizer state and the other's, the whole state, so sharding "
        "saves no memory there (\"copies\": false keeps 1/2 on each; a "
        "lost worker then means the latest checkpoint)");
  }
  starts_.TryStart(ref);  // the events journal both transitions
  return views_.Snapshot(ref);
}

absl::StatusOr<JobStatus> Submissions::Cancel(const std::string& name) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Job * job, jobs_.Get(name));
  if (!IsTerminal(job->status.state())) {
    // The step is rank 0's last report; a checkpoint committed since may be
    // later (a resume starts there).
    const std::string& last = job->status.checkpoint_path();
    events_.EndJob(
        *job, lockstep::v1::CANCELLED,
        absl::StrCat(
            absl::StrFormat("cancelled at step %d", job->status.step()),
            last.empty() ? ""
                         : absl::StrCat("; last checkpoint ",
                                        last.substr(last.rfind('/') + 1))));
    starts_.TryStartAll();
  }
  return views_.Snapshot(*job);
}

absl::Status Submissions::OpenJobFiles(Job& job) const {
  const std::string job_dir =
      JoinPath(JoinPath(options_.storage_dir, "jobs"), job.name);
  job.status.set_storage_path(job_dir);
  job.status.set_storage_id(options_.storage_id);
  job.checkpoints = std::make_shared<CheckpointStore>(
      JoinPath(job_dir, "checkpoints"), job.spec.checkpoint.keep);
  // A deposed leader's late commit then leaves the new leader's alone.
  if (options_.journal_store != nullptr) {
    job.checkpoints->set_term(options_.journal_store->term());
  }
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

}  // namespace lockstep
