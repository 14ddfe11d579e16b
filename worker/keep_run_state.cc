// KeepRunState (see keep_run_state.h): a rank's last completed step kept in
// memory when its generation ends early, whole or as its sharded parts.
#include "worker/keep_run_state.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/fingerprint.h"

namespace lockstep {

void KeepRunState(TrainingSession& session, const lockstep::v1::Assignment& a,
                  KeptState& kept,
                  const std::function<void(const std::string&)>& log,
                  lockstep::v1::FinishRequest& req) {
  absl::StatusOr<std::vector<LoadedCheckpoint>> states = session.CopyState();
  if (!states.ok()) {
    log(
        absl::StrCat("the next generation starts from the latest "
                     "checkpoint: ",
                     states.status().message()));
    return;
  }
  LoadedCheckpoint* state = &states->front();
  const int64_t step = state->state.step;
  if (!state->model_parts.empty()) {
    // Sharded with copies: this rank's part and the previous one's; the
    // coordinator puts the whole state together from the survivors' parts.
    const int world = a.world_size();
    const int prev = (a.rank() + world - 1) % world;
    int64_t bytes = 0;
    std::string steps = absl::StrCat("step ", step);
    for (const LoadedCheckpoint& s : *states) {
      for (const TensorPart& p : s.model_parts) bytes += p.data.size() * 4;
      for (const TensorPart& p : s.optimizer_parts) {
        bytes += p.data.size() * 4;
      }
    }
    if (states->size() > 1) {
      req.set_held_next_step(states->back().state.step);
      steps = absl::StrFormat(
          "steps %d and %d (the failure came at the barrier before the "
          "update to step %d, made on the kept copy)",
          step, states->back().state.step, states->back().state.step);
    }
    kept.Keep(a.job(), *std::move(states), "",
              KeptState::Parts{a.rank(), world});
    req.set_held_step(step);
    req.set_held_rank(a.rank());
    req.set_held_world(world);
    log(absl::StrFormat(
        "kept the parts of ranks %d and %d of the training state of %s in "
        "memory (%.1f MB) for the next generation",
        a.rank(), prev, steps, bytes / 1e6));
    return;
  }
  std::vector<const Tensor*> values;
  for (const auto& [name, t] : state->model) values.push_back(&t);
  const std::string fingerprint = FingerprintTensors(values);
  kept.Keep(a.job(), {*std::move(state)}, fingerprint);
  req.set_held_step(step);
  req.set_held_fingerprint(fingerprint);
  log(absl::StrFormat(
      "kept the training state of step %d in memory (fingerprint %s) for the "
      "next generation",
      step, fingerprint));
}

}  // namespace lockstep
