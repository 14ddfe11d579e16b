// The rules of a job name's resubmission.
#include "coordinator/submit_policy.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/job/job_spec_diff.h"

namespace lockstep {
namespace {

constexpr char kChoices[] =
    "submit with --resume (Python: resume=True) to continue it from its last "
    "checkpoint, with --restart (restart=True) to start over (its results "
    "are moved aside), or pick another name";

}  // namespace

absl::StatusOr<SubmitAction> DecideSubmit(const JobSpec& spec, SubmitMode mode,
                                          const PriorJob* prior,
                                          int64_t latest_checkpoint) {
  const std::string& name = spec.name;
  if (prior == nullptr) {
    if (latest_checkpoint < 0) return SubmitAction::kStart;
    switch (mode) {
      case SubmitMode::kResume:
        return SubmitAction::kResume;
      case SubmitMode::kRestart:
        return SubmitAction::kRestart;
      case SubmitMode::kNew:
        break;
    }
    // Checkpoints of a run this coordinator has no record of (another
    // coordinator's storage, a lost journal): never mixed in silently.
    return absl::AlreadyExistsError(absl::StrFormat(
        "job \"%s\" has checkpoints on the storage (up to step %d) from a "
        "run this coordinator has no record of; %s",
        name, latest_checkpoint, kChoices));
  }
  const std::vector<std::string> differ =
      JobSpecDifferences(*prior->spec, spec);
  if (!prior->ended) {
    if (mode == SubmitMode::kNew && differ.empty()) {
      return SubmitAction::kReturnExisting;
    }
    return absl::AlreadyExistsError(absl::StrFormat(
        "job \"%s\" is already %s at step %d%s; cancel it first (lockstep "
        "cancel %s) or pick another name",
        name, prior->state, prior->step,
        differ.empty()
            ? ""
            : absl::StrCat(" with another spec: ", JoinDifferences(differ)),
        name));
  }
  switch (mode) {
    case SubmitMode::kNew:
      if (differ.empty()) return SubmitAction::kReturnExisting;
      return absl::AlreadyExistsError(absl::StrFormat(
          "job \"%s\" already exists (%s at step %d) with another spec: %s; "
          "%s",
          name, prior->state, prior->step, JoinDifferences(differ), kChoices));
    case SubmitMode::kResume: {
      const std::vector<std::string> model =
          JobSpecDifferences(*prior->spec, spec, "model");
      if (!model.empty()) {
        return absl::AlreadyExistsError(absl::StrFormat(
            "job \"%s\": --resume (resume=True) continues the same model "
            "from its checkpoint, but the model differs: %s; --restart "
            "(restart=True) starts over with the new one (the old results "
            "are moved aside), or pick another name",
            name, JoinDifferences(model)));
      }
      return latest_checkpoint >= 0 ? SubmitAction::kResume
                                    : SubmitAction::kStart;
    }
    case SubmitMode::kRestart:
      return SubmitAction::kRestart;
  }
  return SubmitAction::kStart;
}

}  // namespace lockstep
