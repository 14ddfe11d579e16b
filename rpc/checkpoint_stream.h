// A whole checkpoint as a stream of CheckpointSlice messages, one tensor
// each (model first, then optimizer state), the state on the first: the
// coordinator's answer to FetchCheckpoint and a worker's to FetchState
// (its kept in-memory state), and the worker's reading of either.
#ifndef LOCKSTEP_RPC_CHECKPOINT_STREAM_H_
#define LOCKSTEP_RPC_CHECKPOINT_STREAM_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/checkpoint.h"
#include "grpcpp/support/sync_stream.h"
#include "proto/cluster.pb.h"

namespace lockstep {

// Writes `c` of `job`; false when the client went away. With `parts`
// (kept parts): only the parts of those owners, and the whole tensors only
// when `whole`.
bool WriteCheckpointStream(
    const LoadedCheckpoint& c, const std::string& job,
    grpc::ServerWriterInterface<lockstep::v1::CheckpointSlice>* writer,
    const std::vector<int>* parts = nullptr, bool whole = true);

// Reads a stream written so, to its end and status; every tensor checked
// (TensorFromWire). Errors are annotated with `what` ("fetching checkpoint
// step 40 of job mnist"). The result's path is left empty. A part of a
// tensor is refused unless `parts` (then kept in model_parts and
// optimizer_parts, owner unknown: -1).
absl::StatusOr<LoadedCheckpoint> ReadCheckpointStream(
    grpc::ClientReaderInterface<lockstep::v1::CheckpointSlice>* reader,
    const std::string& what, bool parts = false);

}  // namespace lockstep

#endif  // LOCKSTEP_RPC_CHECKPOINT_STREAM_H_
