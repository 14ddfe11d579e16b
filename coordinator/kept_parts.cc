// PlanKeptParts (see kept_parts.h).
#include "coordinator/kept_parts.h"

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace lockstep {

absl::StatusOr<KeptPartsPlan> PlanKeptParts(
    const std::vector<HeldParts>& held) {
  if (held.empty()) {
    return absl::FailedPreconditionError("no worker kept its part");
  }
  const int world = held.front().held_world;
  std::map<int64_t, std::vector<int>> by_step;  // step -> old ranks
  for (const HeldParts& h : held) {
    if (h.held_world != world || h.held_rank < 0 || h.held_rank >= world) {
      return absl::FailedPreconditionError(
          absl::StrFormat("the kept parts are of worlds of %d and %d ranks",
                          world, h.held_world));
    }
    by_step[h.step].push_back(h.held_rank);
    if (h.next_step > 0) by_step[h.next_step].push_back(h.held_rank);
  }
  // The latest step every worker kept.
  int64_t common = -1;
  for (const auto& [step, ranks] : by_step) {
    if (ranks.size() == held.size()) common = step;
  }
  if (common < 0) {
    std::vector<std::string> what;
    for (const auto& [step, ranks] : by_step) {
      what.push_back(absl::StrFormat("rank%s %s kept step %d",
                                     ranks.size() == 1 ? "" : "s",
                                     absl::StrJoin(ranks, ", "), step));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "no step is kept by every worker: ", absl::StrJoin(what, "; ")));
  }
  KeptPartsPlan plan;
  plan.step = common;
  plan.donors.assign(world, -1);
  for (int k = 0; k < world; ++k) {
    // The owner first (its own part), else the next rank's copy.
    for (int holder : {k, (k + 1) % world}) {
      for (const HeldParts& h : held) {
        if (plan.donors[k] < 0 && h.held_rank == holder) {
          plan.donors[k] = h.rank;
        }
      }
    }
    if (plan.donors[k] < 0) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "the part of rank %d was lost with ranks %d and %d, which kept it", k,
          k, (k + 1) % world));
    }
  }
  return plan;
}

}  // namespace lockstep
