// What a submission of a job name means (a job's name is its identity):
// the same spec again returns the job that has it; another spec is refused
// naming the fields that differ, unless the submitter asks to continue the
// job from its checkpoint (resume: the model must be the same) or to start
// over (restart: earlier results are moved aside). A pure function of the
// name's history, so every case is tested without a cluster.
#ifndef LOCKSTEP_COORDINATOR_SUBMIT_POLICY_H_
#define LOCKSTEP_COORDINATOR_SUBMIT_POLICY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/job/job_spec.h"

namespace lockstep {

enum class SubmitMode { kNew, kResume, kRestart };

enum class SubmitAction {
  kReturnExisting,  // the name's job has this very spec: nothing to do
  kStart,           // a new job (nothing of the name on the storage)
  kResume,          // a new job that restores the latest checkpoint
  kRestart,         // earlier results moved aside, then a new job
};

// The job the name already has on this coordinator, if any.
struct PriorJob {
  const JobSpec* spec = nullptr;
  std::string state;  // "RUNNING", "SUCCEEDED", ...
  bool ended = false;
  int64_t step = 0;
};

// `prior`: null when the coordinator knows no job of the name;
// `latest_checkpoint`: the newest committed checkpoint step under the
// name's folder on the storage, -1 when there is none. AlreadyExists
// (the clients' JobExists) for every refusal, naming what differs and
// what to do.
absl::StatusOr<SubmitAction> DecideSubmit(const JobSpec& spec, SubmitMode mode,
                                          const PriorJob* prior,
                                          int64_t latest_checkpoint);

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_SUBMIT_POLICY_H_
