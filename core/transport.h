// The point-to-point interface collective algorithms are written against
// (DESIGN "Ring all-reduce"): send to the next rank of the ring, receive from
// the previous one, every message tagged. Implementations: an in-process
// transport for tests (core/in_process_transport.h) and gRPC streams between
// worker daemons (worker/grpc_transport.h). No gRPC or NCCL here.
#ifndef LOCKSTEP_CORE_TRANSPORT_H_
#define LOCKSTEP_CORE_TRANSPORT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace lockstep {

// Identifies one message of one collective. Messages with different tags
// never mix, so several collectives may be in flight at once (different
// buckets, or different steps).
struct CollectiveTag {
  int64_t generation = 0;  // a message of another generation is refused
  int64_t step = 0;        // global training step (or an eval/control id)
  int32_t bucket = 0;      // which fused gradient buffer
  int32_t chunk = 0;       // message index within the collective

  bool operator==(const CollectiveTag& o) const {
    return generation == o.generation && step == o.step && bucket == o.bucket &&
           chunk == o.chunk;
  }
  template <typename H>
  friend H AbslHashValue(H h, const CollectiveTag& t) {
    return H::combine(std::move(h), t.generation, t.step, t.bucket, t.chunk);
  }
};

// Bucket ids above any gradient bucket: the step's loss/accuracy sums and
// the evaluation's (worker/job_runner.cc). Heartbeats report them too
// (cluster.proto CollectiveWait).
inline constexpr int32_t kLossBucket = 1 << 24;
inline constexpr int32_t kEvalBucket = kLossBucket + 1;
// The barrier after a drain's checkpoint (a worker leaving on SIGTERM).
inline constexpr int32_t kDrainBucket = kLossBucket + 2;

// "generation 3 step 120 bucket 2 chunk 7", for error messages.
std::string TagToString(const CollectiveTag& tag);
// "gradient bucket 2", "the loss all-reduce", "the evaluation all-reduce".
std::string BucketName(int32_t bucket);

// Thread-safe: several collectives (different tags) may call Send and Recv
// concurrently from different threads.
class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // Queues `count` floats (copied before returning) for rank
  // (rank + 1) % world. Does not wait for the peer to receive them.
  // Fails (and keeps failing) once the transport is aborted or the link to
  // the next rank is broken; the error names that rank.
  virtual absl::Status SendToNext(const CollectiveTag& tag, const float* data,
                                  int64_t count) = 0;

  // Blocks until the message with `tag` from rank (rank - 1 + world) % world
  // has arrived and returns its bytes (the caller owns them). Errors:
  // DeadlineExceeded at `deadline` naming the previous rank and the tag;
  // Aborted after Abort() (with its reason); Unavailable when the link from
  // the previous rank broke; FailedPrecondition when that rank sent a
  // message the transport refused (stale generation, another job).
  virtual absl::StatusOr<std::string> RecvFromPrev(const CollectiveTag& tag,
                                                   absl::Time deadline) = 0;

  // Fails every pending and future Send/Recv with Aborted(reason). Used when
  // the generation changes or the job is cancelled. Idempotent; thread-safe.
  virtual void Abort(const absl::Status& reason) = 0;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_TRANSPORT_H_
