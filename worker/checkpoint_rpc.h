// A worker's side of chief-written checkpoints: streaming its slice of the
// tensors to the coordinator, and fetching a committed checkpoint back.
#ifndef LOCKSTEP_WORKER_CHECKPOINT_RPC_H_
#define LOCKSTEP_WORKER_CHECKPOINT_RPC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/checkpoint.h"
#include "core/train/optimizer.h"
#include "proto/cluster.grpc.pb.h"

namespace lockstep {

struct SliceInfo {
  std::string worker_id;  // the sender (it holds `rank`)
  std::string job;
  int64_t generation = 0;
  int rank = 0;
  int world_size = 1;
  bool final = false;  // the job's last step (CheckpointSlice.final)
};

// Sends the tensors with index i % world_size == rank (model first, then
// optimizer state; with sharded optimizer state, the model tensors so and
// every part of the state this rank holds) and `state`. Blocks until the
// coordinator acknowledged the slice (not the commit: the coordinator commits
// once every rank's slice is in).
absl::Status UploadCheckpointSlice(lockstep::v1::Coordinator::Stub* stub,
                                   const SliceInfo& info,
                                   const CheckpointState& state,
                                   const NamedTensors& model,
                                   const OptimizerParts& optimizer);

// Every tensor of the committed checkpoint at `step`, CRC-checked.
absl::StatusOr<LoadedCheckpoint> FetchCheckpoint(
    lockstep::v1::Coordinator::Stub* stub, const std::string& job,
    int64_t step);

// The training state a peer kept of `job` at `step` (WorkerState.FetchState
// on rank `donor`), checked as a checkpoint is. Its path names the donor.
// With `parts` (kept parts): the parts of those ranks of the failed
// generation, and the whole tensors only when `whole`.
absl::StatusOr<LoadedCheckpoint> FetchKeptState(
    lockstep::v1::WorkerState::Stub* stub, const std::string& job, int64_t step,
    int donor, const std::vector<int>* parts = nullptr, bool whole = true);

}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_CHECKPOINT_RPC_H_
