// How the ranks of one generation agree on an NCCL unique id through the
// coordinator (cluster.proto PublishNcclId / FetchNcclId), as Horovod
// broadcasts rank 0's id over its control plane. Plain C++: it only moves
// the 128 bytes; kernels/cuda/nccl_communicator.h makes and uses them.
#ifndef LOCKSTEP_WORKER_NCCL_BOOTSTRAP_H_
#define LOCKSTEP_WORKER_NCCL_BOOTSTRAP_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/cluster.grpc.pb.h"

namespace lockstep {

// One call on a coordinator: `call` gets the stub to use. A
// CoordinatorStubs' Run fails over (after an UNAVAILABLE or
// DEADLINE_EXCEEDED answer the next call goes to the next coordinator, as a
// standby answers UNAVAILABLE naming the leader); a single stub always
// answers alike.
using CoordinatorCall =
    std::function<absl::Status(lockstep::v1::Coordinator::StubInterface*)>;
using CoordinatorRunner = std::function<absl::Status(const CoordinatorCall&)>;

// The unique id of `job`'s generation `generation`, which `worker_id` holds
// as `rank`. Rank 0 calls `make_id` (NewNcclUniqueId on a GPU worker) and
// publishes the result; every other rank fetches it with long polls. Blocks
// up to about `timeout`, retrying every second while the coordinator is
// UNAVAILABLE (restarting, replaying its journal). Errors keep the
// coordinator's code and say which id: DeadlineExceeded naming rank 0 when
// it has not published in time, FailedPrecondition once the generation is
// over (do not retry: the next generation needs a new id), PermissionDenied
// for a worker without that rank. `coordinator` is not owned.
// `on_unavailable` (when set) sees each UNAVAILABLE answer before its retry.
// Through `run` with several coordinators, each call waits at most `poll`
// (a publish's deadline, a fetch's long poll) and a DEADLINE_EXCEEDED call
// is tried again (on the next coordinator) until `timeout`: a paused
// leader holds the ranks back no longer than that, and the one that leads
// next hands out the id rank 0 published (the coordinator journals it).
absl::StatusOr<std::string> BootstrapNcclId(
    const CoordinatorRunner& run, const std::string& worker_id,
    const std::string& job, int64_t generation, int rank,
    std::function<absl::StatusOr<std::string>()> make_id,
    absl::Duration timeout, absl::Duration poll,
    std::function<void(const absl::Status&)> on_unavailable = nullptr);

}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_NCCL_BOOTSTRAP_H_
