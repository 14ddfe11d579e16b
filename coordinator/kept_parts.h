// Whether the parts a failed generation's survivors kept in memory make the
// whole training state of a job with sharded optimizer state and copies
// (cluster.copies): rank k's part is kept by rank k and by rank k+1, so
// it survives unless both are lost. Which survivor sends which part.
#ifndef LOCKSTEP_COORDINATOR_KEPT_PARTS_H_
#define LOCKSTEP_COORDINATOR_KEPT_PARTS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace lockstep {

// What one worker of the next generation (its rank there) kept: the parts
// of ranks held_rank and held_rank - 1 of a world of held_world, of
// `step`, and also of `next_step` when > 0 (the failure came at the
// barrier before that step's update, which it made on its copy).
struct HeldParts {
  int rank = 0;
  int64_t step = 0;
  int held_rank = 0;
  int held_world = 0;
  int64_t next_step = 0;
};

struct KeptPartsPlan {
  int64_t step = 0;
  // donors[k]: the rank of the next generation that sends old rank k's
  // part (its owner when it survived, else the next rank).
  std::vector<int> donors;
};

// The plan, of the latest step every worker kept, or FailedPrecondition
// saying why the parts do not make the whole state: none kept, worlds that
// differ, no step every worker kept ("ranks 0, 2 kept step 41; rank 1
// kept step 40": cannot happen with the barrier before the update, which
// every rank passes only once all have what the update needs), or a part
// lost with both its holders ("the part of rank 2 was lost with ranks 2
// and 3").
absl::StatusOr<KeptPartsPlan> PlanKeptParts(const std::vector<HeldParts>& held);

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_KEPT_PARTS_H_
