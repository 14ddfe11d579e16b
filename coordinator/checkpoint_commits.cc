// CheckpointCommits (see checkpoint_commits.h).
#include "coordinator/checkpoint_commits.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_util.h"
#include "base/status_macros.h"

namespace lockstep {

absl::StatusOr<lockstep::v1::CheckpointAck>
CheckpointCommits::AddCheckpointSlice(
    const std::vector<lockstep::v1::CheckpointSlice>& messages) {
  if (messages.empty()) {
    return absl::InvalidArgumentError("an empty checkpoint slice stream");
  }
  const auto& head = messages.front();
  std::shared_ptr<CheckpointAssembler> assembler;
  {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(Job * job, jobs_.Get(head.job()));
    if (IsTerminal(job->status.state())) {
      return absl::CancelledError(absl::StrFormat(
          "checkpoint slice refused: job %s is %s (%s)", head.job(),
          JobStateName(job->status.state()), job->status.message()));
    }
    if (job->status.generation() != head.generation()) {
      events_.Fenced(*job, "checkpoint_slice", head.generation(),
                     absl::StrCat("rank ", head.rank()));
    }
    if (job->status.generation() != head.generation() ||
        job->status.state() != lockstep::v1::RUNNING) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "checkpoint slice for generation %d refused: job %s is %s at "
          "generation %d",
          head.generation(), head.job(), JobStateName(job->status.state()),
          job->status.generation()));
    }
    RETURN_IF_ERROR(CheckReporter(*job, head.rank(), head.worker_id(),
                                  "a checkpoint slice"));
    assembler = job->assembler;
  }
  // A coordinator that stopped leading commits nothing more (etcd cannot
  // fence the storage: this narrows a deposed leader's window to the
  // commit already under way).
  if (const std::string why = not_leading_(); !why.empty()) {
    return absl::UnavailableError(why);
  }
  // Verify and (for the last slice) commit without holding the state lock.
  absl::StatusOr<CommitInfo> info = assembler->Add(messages);
  absl::MutexLock lock(&mu_);
  Job* job = jobs_.Find(head.job());
  if (!info.ok()) {
    if (job != nullptr) {
      job->reports->CheckpointFailed();
      events_.Event(*job,
                    absl::StrCat("checkpoint step ", head.step(),
                                 " not committed: ", info.status().message()));
      if (head.final() && job->status.generation() == head.generation() &&
          job->status.state() == lockstep::v1::RUNNING) {
        // Without its final checkpoint the job has not succeeded: the
        // generation ends (no worker is to blame: the storage is), and the
        // next one commits it again from the ranks' memory.
        failures_.Recover(
            *job, nullptr,
            BriefReason(absl::StrFormat(
                "the final checkpoint (step %d) was not committed: %s",
                head.step(), info.status().message())));
      }
    }
    return info.status();
  }
  lockstep::v1::CheckpointAck ack;
  ack.set_committed(info->committed);
  ack.set_path(info->path);
  if (info->committed && job != nullptr) {
    job->reports->CheckpointCommitted(*info);
    job->status.set_checkpoint_path(info->path);
    events_.Event(
        *job, absl::StrFormat("checkpoint %s committed (%.1f MB, %.3f s)",
                              info->path, info->bytes / 1e6, info->seconds));
  }
  return ack;
}

absl::StatusOr<LoadedCheckpoint> CheckpointCommits::LoadCheckpoint(
    const std::string& name, int64_t step) const {
  std::shared_ptr<CheckpointStore> store;
  {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(const Job* job, jobs_.Get(name));
    store = job->checkpoints;
  }
  // The step the generation starts from (ChooseStart verified it), not
  // the latest: a commit of the previous generation that lands after the
  // start (its slices were in before the failure) must not change what the
  // new ranks load.
  const std::string folder = CheckpointFolderName(step);
  absl::StatusOr<LoadedCheckpoint> loaded = store->LoadStep(folder);
  if (!loaded.ok()) {
    return absl::Status(
        loaded.status().code(),
        absl::StrFormat("checkpoint %s of job %s (%s): %s", folder, name,
                        JoinPath(store->dir(), folder),
                        loaded.status().message()));
  }
  return loaded;
}

}  // namespace lockstep
