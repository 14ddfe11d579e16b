// Checkpoint commits (coordinator.h, protocol step 4): the ranks' slices
// of a step's checkpoint, checked (generation, state, sender) under the
// Coordinator's state lock, then verified and, at a step's last slice,
// committed by the job's CheckpointAssembler outside it; a failed commit
// of the final checkpoint ends the generation (Failures::Recover, nobody
// blamed). And a committed checkpoint loaded for a worker. A part of the
// Coordinator: it takes the state lock itself.
#ifndef LOCKSTEP_COORDINATOR_CHECKPOINT_COMMITS_H_
#define LOCKSTEP_COORDINATOR_CHECKPOINT_COMMITS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/failures.h"
#include "coordinator/job_events.h"
#include "coordinator/job_table.h"
#include "core/checkpoint/checkpoint.h"
#include "proto/cluster.pb.h"

namespace lockstep {

class CheckpointCommits {
 public:
  using Job = JobTable::Job;

  // None of these is owned; `mu` guards jobs and failures. `not_leading`
  // says why this coordinator may no longer commit ("" while it may).
  CheckpointCommits(absl::Mutex& mu, JobTable& jobs, JobEvents& events,
                    Failures& failures,
                    std::function<std::string()> not_leading)
      : mu_(mu),
        jobs_(jobs),
        events_(events),
        failures_(failures),
        not_leading_(std::move(not_leading)) {}

  // The services' AddCheckpointSlice and LoadCheckpoint (coordinator.h,
  // step 4).
  // One worker's whole slice stream (already read). Commits the checkpoint
  // when it is the last slice of its step.
  absl::StatusOr<lockstep::v1::CheckpointAck> AddCheckpointSlice(
      const std::vector<lockstep::v1::CheckpointSlice>& messages)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The committed checkpoint of `job` at `step` (where its generation
  // starts), verified, whether or not a later one was committed since;
  // DataLoss naming the folder when it is missing or damaged.
  absl::StatusOr<LoadedCheckpoint> LoadCheckpoint(const std::string& job,
                                                  int64_t step) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Mutex& mu_;
  JobTable& jobs_ ABSL_GUARDED_BY(mu_);
  JobEvents& events_;
  Failures& failures_ ABSL_GUARDED_BY(mu_);
  const std::function<std::string()> not_leading_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_CHECKPOINT_COMMITS_H_
