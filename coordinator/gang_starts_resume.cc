// GangStarts::ChooseStart (see gang_starts.h): where a generation starts,
// the latest checkpoint or the memory a failed generation's survivors kept.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/gang_starts.h"
#include "coordinator/kept_parts.h"

namespace lockstep {

int64_t GangStarts::ChooseStart(Job& job, const std::vector<Worker*>& idle,
                                bool recovering) {
  // Resume from the latest good checkpoint of this job name, if any.
  std::vector<std::string> warnings;
  absl::StatusOr<LoadedCheckpoint> latest =
      job.checkpoints->LoadLatest(&warnings);
  for (const std::string& w : warnings) events_.Event(job, "warning: " + w);
  job.start_step = latest.ok() ? latest->state.step : 0;
  if (!latest.ok() && !absl::IsNotFound(latest.status())) {
    events_.Event(job, absl::StrCat("warning: starting from step 0: ",
                                    latest.status().message()));
  }
  // Or from a survivor's memory, when one kept a later step of the
  // generation that just failed: the furthest (a rank may have completed
  // the failed step's update where another had not yet).
  const int64_t checkpoint_step = job.start_step;
  job.memory_step = 0;
  job.memory_donor = -1;
  job.memory_fingerprint.clear();
  job.memory_part_donors.clear();
  std::vector<HeldParts> parts;  // sharded with copies
  for (size_t r = 0; recovering && r < idle.size(); ++r) {
    const Worker& w = *idle[r];
    if (w.held_job != job.name ||
        w.held_generation != job.status.generation()) {
      continue;
    }
    if (w.held_world > 0) {
      parts.push_back({static_cast<int>(r), w.held_step, w.held_rank,
                       w.held_world, w.held_next_step});
    } else if (w.held_step > job.start_step) {
      job.start_step = job.memory_step = w.held_step;
      job.memory_donor = static_cast<int>(r);
      job.memory_fingerprint = w.held_fingerprint;
    }
  }
  if (!parts.empty()) {
    absl::StatusOr<KeptPartsPlan> plan = PlanKeptParts(parts);
    if (!plan.ok()) {
      events_.Event(
          job, absl::StrCat("the survivors' memory does not hold the whole "
                            "training state (",
                            plan.status().message(),
                            "): from the latest checkpoint"));
    } else if (plan->step > job.start_step) {
      job.start_step = job.memory_step = plan->step;
      job.memory_donor = plan->donors[0];
      job.memory_part_donors = plan->donors;
    }
  }
  return checkpoint_step;
}

}  // namespace lockstep
