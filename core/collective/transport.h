// The point-to-point interface collective algorithms are written against
// (DESIGN "Ring all-reduce"): send to the next rank of the ring, receive from
// the previous one, every message tagged. Implementations: an in-process
// transport for tests (core/collective/in_process_transport.h) and gRPC streams between
// worker daemons (worker/grpc_ring_transport.h). No gRPC or NCCL here.
#ifndef LOCKSTEP_CORE_COLLECTIVE_TRANSPORT_H_
#define LOCKSTEP_CORE_COLLECTIVE_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
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

// Sharded optimizer state: the all-gather of the parameters of gradient
// bucket b is bucket kParamGatherBucket + b; with copies, the pass of its
// owned sums to the next rank is kGradCopyBucket + b.
inline constexpr int32_t kParamGatherBucket = 1 << 23;
inline constexpr int32_t kGradCopyBucket = 1 << 22;
// Bucket ids above any gradient bucket: the step's loss/accuracy sums and
// the evaluation's (worker/job_runner.cc). Heartbeats report them too
// (cluster.proto CollectiveWait).
inline constexpr int32_t kLossBucket = 1 << 24;
inline constexpr int32_t kEvalBucket = kLossBucket + 1;
// The barrier after a drain's checkpoint (a worker leaving on SIGTERM).
inline constexpr int32_t kDrainBucket = kLossBucket + 2;
// Sharded optimizer state: the sum of the gradient norm's parts.
inline constexpr int32_t kNormBucket = kLossBucket + 3;
// Sharded with copies: the barrier before the step's update (after it no
// rank lacks what the update needs).
inline constexpr int32_t kUpdateBarrierBucket = kLossBucket + 4;
// The sums inside a training pass (sync batch norm): kPassSumBucket plus
// the PassCollective key (4 * graph node + 0..3).
inline constexpr int32_t kPassSumBucket = kLossBucket + 64;
// Micro-batch m of a step (gradient accumulation) adds m * this to its
// pass sums' keys (job_spec.h caps m below 1024: the ids stay in int32).
inline constexpr int32_t kPassSumMicroStride = 1 << 16;

// "generation 3 step 120 bucket 2 chunk 7", for error messages.
std::string TagToString(const CollectiveTag& tag);
// "gradient bucket 2", "the loss all-reduce", "the evaluation all-reduce",
// "sum 1 of graph node 7 in the pass (sync batch norm)".
std::string BucketName(int32_t bucket);

// How a received message lands in the caller's buffer.
enum class RecvOp {
  kCopy,  // dst[i] = message[i]
  kAdd,   // dst[i] = message[i] + dst[i] (the partial sum comes first)
};

// What a message's payload holds. Receivers always apply it to floats.
enum class WireType {
  kFloat32,   // native-endian float32
  kBfloat16,  // native-endian bfloat16 (the top half of a float32): half the
              // bytes, 8 significant bits (cluster.compression "bf16")
};
// 4 or 2.
size_t WireElementBytes(WireType type);
// "float32", "bfloat16".
const char* WireTypeName(WireType type);

// Counts one collective's sends that a transport may still be reading
// (sends are zero-copy: the transport reads the caller's buffer). Copies
// share one count. Thread-safe.
class SendTracker {
 public:
  SendTracker();

  // A transport calls Begin before it keeps a pointer into the caller's
  // buffer and Done once it no longer reads it (sent, or dropped).
  void Begin() const;
  void Done() const;
  // Blocks until no send is in flight, or until `deadline`; true when none
  // is.
  bool WaitIdle(absl::Time deadline) const;
  int64_t in_flight() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// Applies a message of `type` values that arrives in pieces (gRPC slices: a
// value may be split between two of them) to dst[0..count) with `op`,
// widening bfloat16 to float32. The caller checks the total length first
// (CheckMessageLength).
class PayloadSink {
 public:
  PayloadSink(float* dst, RecvOp op, WireType type)
      : dst_(dst), op_(op), type_(type), element_(WireElementBytes(type)) {}
  void Append(const char* bytes, size_t n);

 private:
  void Apply(const char* bytes, int64_t values);

  float* dst_;  // the next float to write
  const RecvOp op_;
  const WireType type_;
  const size_t element_;
  char carry_[sizeof(float)];
  size_t carried_ = 0;
};

// InvalidArgument "expected E bytes (C float32 values), received B bytes"
// unless a message of `bytes` bytes holds exactly `count` values of `type`.
absl::Status CheckMessageLength(size_t bytes, int64_t count,
                                WireType type);

// Thread-safe: several collectives (different tags) may call Send and Recv
// concurrently from different threads.
class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // Queues `count` values of `type` at `data` for rank (rank + 1) % world
  // without copying them: the transport may read them until it has called
  // sends.Done() for this message, so the caller keeps the buffer alive
  // until sends.WaitIdle(), and leaves those values unchanged until the
  // next rank has received them. Does not wait for the peer. Fails (and
  // keeps failing) once the transport is aborted or the link to the next
  // rank is broken; the error names that rank.
  virtual absl::Status SendToNext(const CollectiveTag& tag, const void* data,
                                  int64_t count, WireType type,
                                  const SendTracker& sends) = 0;

  // Blocks until the message with `tag` from rank (rank - 1 + world) % world
  // has arrived and applies it to dst[0..count) with `op`, reading straight
  // from the received bytes (widening bfloat16). Errors: InvalidArgument
  // when the message is not exactly `count` values of `type` (dst is
  // untouched); DeadlineExceeded at `deadline` naming the previous rank and
  // the tag; Aborted after Abort() (with its reason); Unavailable when the
  // link from the previous rank broke; FailedPrecondition when that rank
  // sent a message the transport refused (stale generation, another job).
  virtual absl::Status RecvFromPrev(const CollectiveTag& tag,
                                    absl::Time deadline, float* dst,
                                    int64_t count, WireType type,
                                    RecvOp op) = 0;

  // Fails every pending and future Send/Recv with Aborted(reason), and drops
  // (releases) queued sends. Used when the generation changes or the job is
  // cancelled. Idempotent; thread-safe.
  virtual void Abort(const absl::Status& reason) = 0;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_COLLECTIVE_TRANSPORT_H_
