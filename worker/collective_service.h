// The collective service each worker daemon hosts for the whole of its
// life: incoming Push streams from the previous rank, routed to the
// GrpcRingTransport of their (job, generation).
#ifndef LOCKSTEP_WORKER_COLLECTIVE_SERVICE_H_
#define LOCKSTEP_WORKER_COLLECTIVE_SERVICE_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/log.h"
#include "grpcpp/grpcpp.h"
#include "proto/collective.grpc.pb.h"
#include "worker/grpc_ring_transport.h"

namespace lockstep {

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
  // The current transport's RecentLink (zeros when none).
  GrpcRingTransport::LinkTiming CurrentLink();

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
  // Takes a finished stream's reference to its transport: the parking
  // thread drops it. A transport's destructor joins its lane threads, so
  // the last reference must never be dropped on a gRPC callback thread.
  void Retire(std::shared_ptr<GrpcRingTransport> transport);
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
  std::vector<std::shared_ptr<GrpcRingTransport>> retired_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread parking_thread_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_COLLECTIVE_SERVICE_H_
