// Chief-side checkpoint commit from worker slices (DESIGN "Checkpoints"):
// each rank streams the tensors i % world == rank (with sharded optimizer
// state, the model tensors so and its own parts of the state); once every
// rank's slice of a step has arrived and verified, the whole checkpoint is
// committed atomically through CheckpointStore.
#ifndef LOCKSTEP_COORDINATOR_CHECKPOINT_ASSEMBLER_H_
#define LOCKSTEP_COORDINATOR_CHECKPOINT_ASSEMBLER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/checkpoint/checkpoint.h"
#include "core/checkpoint/tensor_parts.h"
#include "proto/cluster.pb.h"

namespace lockstep {

inline constexpr size_t kMaxPendingCheckpointSteps = 4;

struct CommitInfo {
  bool committed = false;  // this slice completed and committed a step
  std::string path;        // the step folder
  int64_t bytes = 0;
  double seconds = 0;  // the commit's duration
};

// Thread-safe (one mutex; a commit holds it).
class CheckpointAssembler {
 public:
  explicit CheckpointAssembler(std::shared_ptr<CheckpointStore> store)
      : store_(std::move(store)) {}

  // Adds one rank's slice (all messages of its stream). Errors name what is
  // wrong: DataLoss for a tensor whose CRC or size does not match,
  // InvalidArgument for a slice that contradicts the others (world size,
  // tensor counts, a rank sent twice, a tensor index that is not its own),
  // or the commit's own error. A step of an older generation than one
  // already seen is refused (FailedPrecondition). At most
  // kMaxPendingCheckpointSteps steps wait for their other slices: a slice
  // of a new step then drops the oldest waiting one (a step a rank never
  // completed; the newest ones are the ones worth committing), or is
  // refused (ResourceExhausted) when it is older than all of them. So a
  // rank that never sends its slice, or a peer that sends slices of ever
  // new steps, holds at most that many steps of tensors here.
  absl::StatusOr<CommitInfo> Add(
      const std::vector<lockstep::v1::CheckpointSlice>& messages);

 private:
  struct Pending {
    CheckpointState state;
    int world_size = 0;
    int model_tensors = 0, optimizer_tensors = 0;
    bool sharded = false;  // optimizer state in parts (cluster.shard)
    std::set<int> ranks;
    std::map<std::string, Tensor> model, optimizer;
    // Sharded: the optimizer tensors' parts received.
    TensorParts parts;
  };
  absl::Mutex mu_;
  std::shared_ptr<CheckpointStore> store_;
  std::map<std::pair<int64_t, int64_t>, Pending> pending_
      ABSL_GUARDED_BY(mu_);  // by (generation, step)
  int64_t newest_generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_CHECKPOINT_ASSEMBLER_H_
