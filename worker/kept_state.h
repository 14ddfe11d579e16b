// The training state a worker keeps in memory when its generation fails
// (CPU replicas), so the next generation starts from the last completed
// step instead of the last checkpoint (DESIGN "Failure and rejoin"): its
// own copy for itself, served to the other ranks over WorkerState.
#ifndef LOCKSTEP_WORKER_KEPT_STATE_H_
#define LOCKSTEP_WORKER_KEPT_STATE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/checkpoint/checkpoint.h"
#include "grpcpp/grpcpp.h"
#include "proto/cluster.grpc.pb.h"

namespace lockstep {

// Kept parts (sharded optimizer state with copies): those of ranks `rank`
// and rank - 1 of a world of `world`; world 0: the whole state.
struct KeptParts {
  int rank = -1;
  int world = 0;
};

// Thread-safe: the job thread keeps and takes, gRPC threads read.
class KeptState {
 public:
  using Parts = KeptParts;
  // Replaces what was kept: one state, or (parts) those of two steps.
  // `state.model` in model order; `fingerprint` is theirs
  // (core/fingerprint.h; "" for parts).
  void Keep(const std::string& job, std::vector<LoadedCheckpoint> states,
            const std::string& fingerprint, Parts parts = {});
  // The kept state if it is `job`'s at `step` (and, when `fingerprint` is
  // not empty, has it), else null.
  std::shared_ptr<const LoadedCheckpoint> Get(
      const std::string& job, int64_t step,
      const std::string& fingerprint = "") const;
  void Clear();
  // What is kept, for a registration: held_* of `req` (nothing when
  // nothing is kept).
  void Describe(lockstep::v1::RegisterRequest* req) const;

 private:
  mutable absl::Mutex mu_;
  std::string job_ ABSL_GUARDED_BY(mu_);
  std::string fingerprint_ ABSL_GUARDED_BY(mu_);
  Parts parts_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<const LoadedCheckpoint>> states_
      ABSL_GUARDED_BY(mu_);
};

// WorkerState.FetchState over a KeptState (not owned).
class WorkerStateService final : public lockstep::v1::WorkerState::Service {
 public:
  explicit WorkerStateService(const KeptState* kept) : kept_(kept) {}
  grpc::Status FetchState(
      grpc::ServerContext* context,
      const lockstep::v1::FetchStateRequest* request,
      grpc::ServerWriter<lockstep::v1::CheckpointSlice>* writer) override;

 private:
  const KeptState* const kept_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_KEPT_STATE_H_
