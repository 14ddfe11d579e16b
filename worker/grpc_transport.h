// The ring transport between worker daemons over gRPC (DESIGN "Ring
// all-reduce"): rank r keeps `lanes` long-lived Push streams to rank r+1;
// rank r+1's CollectiveService routes them into the GrpcRingTransport of the
// matching (job, generation), which checks every message before its bytes
// reach a mailbox keyed by tag. Push is raw on both ends (proto/
// collective.proto has the framing): a message's floats go out of the
// caller's buffer and are summed out of gRPC's receive slices, with no copy
// in between.
#ifndef LOCKSTEP_WORKER_GRPC_TRANSPORT_H_
#define LOCKSTEP_WORKER_GRPC_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "core/collective/transport.h"
#include "core/log.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "proto/collective.grpc.pb.h"
#include "rpc/tls.h"

namespace lockstep {

struct GrpcRingOptions {
  std::string job;
  int64_t generation = 0;
  int rank = 0;
  std::vector<std::string> peers;  // collective addresses in rank order
  int lanes = 2;                   // parallel streams to the next rank
  TlsFiles tls;                    // the worker's certificate; off: plaintext
};

// Call once at process start in processes that run the ring. glibc serves
// large buffers with mmap and unmaps them on free, so each one re-faults
// and zeroes its pages; raising the mmap and trim thresholds keeps gRPC's
// receive buffers in the reused heap.
void KeepMessageBuffersResident();

// A received message's payload: spans into gRPC's receive slices, which it
// keeps alive. Never copied.
class RingPayload {
 public:
  RingPayload() = default;
  // Owned bytes: for tests and hand-made messages.
  explicit RingPayload(std::string bytes,
                       WireType type = WireType::kFloat32);

  size_t size() const { return size_; }
  WireType type() const { return type_; }
  void AppendTo(PayloadSink& sink) const;

 private:
  friend class RingMessageCodec;
  std::vector<grpc::Slice> slices_;
  std::shared_ptr<const std::string> owned_;
  std::vector<std::pair<const char*, size_t>> spans_;
  size_t size_ = 0;
  WireType type_ = WireType::kFloat32;
};

struct RingMessage {
  lockstep::v1::RingHeader header;
  RingPayload payload;
};

class RingMessageCodec {
 public:
  // Frames a message (proto/collective.proto): the header is copied, the
  // payload referenced. `sends` (may be null) counts the send from now
  // until gRPC releases the payload slice.
  static grpc::ByteBuffer Encode(lockstep::v1::RingHeader header,
                                 const void* data, int64_t count,
                                 WireType type, const SendTracker* sends);
  // InvalidArgument, naming what is wrong, for bytes that are not a ring
  // message (a header length past the end, a header that does not parse, a
  // payload of another length than the header says).
  static absl::StatusOr<RingMessage> Decode(const grpc::ByteBuffer& buffer);
};

class GrpcRingTransport : public Transport {
 public:
  explicit GrpcRingTransport(GrpcRingOptions options);
  // Closes the outgoing streams (cancelling them if aborted, or if they do
  // not close within seconds) and waits until gRPC is done with them.
  ~GrpcRingTransport() override;

  int rank() const override { return options_.rank; }
  int world_size() const override {
    return static_cast<int>(options_.peers.size());
  }
  absl::Status SendToNext(const CollectiveTag& tag, const void* data,
                          int64_t count, WireType type,
                          const SendTracker& sends) override;
  absl::Status RecvFromPrev(const CollectiveTag& tag, absl::Time deadline,
                            float* dst, int64_t count, WireType type,
                            RecvOp op) override;
  void Abort(const absl::Status& reason) override;

  const std::string& job() const { return options_.job; }
  // Streams to the next rank (0 in a ring of one).
  int lanes() const { return static_cast<int>(lanes_.size()); }
  int64_t generation() const { return options_.generation; }
  int prev_rank() const { return (rank() - 1 + world_size()) % world_size(); }
  int next_rank() const { return (rank() + 1) % world_size(); }

  // Called by CollectiveService for each incoming message. Returns the
  // refusal (FailedPrecondition / InvalidArgument, naming what is wrong) and
  // then fails every Recv with it; nothing refused reaches a mailbox.
  absl::Status Deliver(const lockstep::v1::RingHeader& header,
                       RingPayload payload);
  // The incoming stream from the previous rank broke (not a clean close).
  void LinkBroken(const std::string& detail);

  // The oldest receive now blocked (for hang diagnosis); waiting is false
  // when none is.
  struct Wait {
    bool waiting = false;
    int from_rank = -1;
    CollectiveTag tag;
    double seconds = 0;
  };
  Wait OldestWait();
  // The neighbour the first failure points at (a broken or refused stream,
  // a send that failed, a receive that timed out); -1 when none does (an
  // abort, no failure).
  int suspect_rank();

 private:
  class LaneStream;
  void Fail(const absl::Status& status, int suspect = -1);

  const GrpcRingOptions options_;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs_;  // one per lane
  std::vector<LaneStream*> lanes_;  // each lives until its stream is done

  absl::Mutex mu_;
  absl::CondVar arrived_;
  absl::flat_hash_map<CollectiveTag, RingPayload> mailbox_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);  // first failure; sticky
  int suspect_ ABSL_GUARDED_BY(mu_) = -1;
  // Receives in progress and since when.
  absl::flat_hash_map<CollectiveTag, absl::Time> waiting_ ABSL_GUARDED_BY(mu_);
};

// The gRPC service each worker daemon hosts for the whole of its life. It
// waits (bounded) for the transport of a stream's (job, generation) to be
// attached, refuses streams of older generations and other jobs, and feeds
// messages to the attached transport. Push runs as a callback reactor: a
// stream that arrives before its generation's transport is parked (no
// gRPC thread blocks) until Attach or its wait runs out.
class CollectiveService final
    : public lockstep::v1::Collective::WithRawCallbackMethod_Push<
          lockstep::v1::Collective::Service> {
 public:
  // How long a stream may wait for its generation's transport to appear
  // (peers start a generation at slightly different times).
  explicit CollectiveService(absl::Duration attach_wait = absl::Seconds(30));
  // Shut the server down first: that ends every stream.
  ~CollectiveService() override;

  // Refused streams are logged here (a peer that speaks out of turn).
  void SetLog(LogFn log) { log_ = std::move(log); }

  void Attach(std::shared_ptr<GrpcRingTransport> transport);
  // Detaches it if it is the attached one.
  void Detach(const GrpcRingTransport* transport);
  // Aborts the attached transport (the job was stopped): its waits return.
  void AbortCurrent(const absl::Status& reason);
  // The attached transport's OldestWait (not waiting when none is attached).
  GrpcRingTransport::Wait CurrentWait();

  grpc::ServerReadReactor<grpc::ByteBuffer>* Push(
      grpc::CallbackServerContext* context,
      grpc::ByteBuffer* response) override;

 private:
  class PushReactor;
  struct Route {
    std::shared_ptr<GrpcRingTransport> transport;  // set when routed
    absl::Status refusal;                          // set when refused
  };
  // The route of a stream whose first message has `header`; neither set
  // while its generation has not started here and `give_up` is ahead.
  Route Find(const lockstep::v1::RingHeader& header, absl::Time give_up)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Park(PushReactor* reactor);
  // True when the reactor was parked (and is no longer).
  bool Unpark(PushReactor* reactor);
  void ParkingLoop();
  void LogRefusal(const std::string& peer, const absl::Status& why);

  const absl::Duration attach_wait_;
  LogFn log_;
  absl::Mutex mu_;
  std::shared_ptr<GrpcRingTransport> current_ ABSL_GUARDED_BY(mu_);
  // The newest generation ever attached per job: older ones are stale.
  absl::flat_hash_map<std::string, int64_t> newest_ ABSL_GUARDED_BY(mu_);
  std::vector<PushReactor*> parked_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread parking_thread_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_GRPC_TRANSPORT_H_
