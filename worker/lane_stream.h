// One Push stream to the next rank of the ring (a lane; the transport keeps
// several, one channel each): writes the queued messages one at a time.
// Sends start writes from outside the reactions, so one hold keeps the
// stream open until no more writes will come (closed or broken, and no
// write in flight). Its owner waits for OnDone (WaitDone) before deleting
// it.
#ifndef LOCKSTEP_WORKER_LANE_STREAM_H_
#define LOCKSTEP_WORKER_LANE_STREAM_H_

#include <deque>
#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace lockstep {

class RingLaneStream
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // Starts the call on `stub` (not owned). `on_failure` runs once, on a
  // gRPC thread, with the call's status when the stream ends otherwise
  // than by a clean Close.
  RingLaneStream(grpc::GenericStub* stub,
                 std::function<void(const grpc::Status&)> on_failure);

  // Queues a message (swapped out of *message); false once the stream is
  // broken or closing.
  bool Send(grpc::ByteBuffer* message);
  // Drops what is queued and cancels the call: gRPC lets go of the
  // payloads.
  void Cancel();
  // No more sends: the stream closes once the queue has drained.
  void Close();
  // True once gRPC is done with the stream (OnDone ran).
  bool WaitDone(absl::Time deadline);

  void OnWriteDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  // What to start once the lock is released.
  struct After {
    bool write = false;        // StartWrite(&current_)
    bool writes_done = false;  // StartWritesDone()
    bool release = false;      // RemoveHold()
  };

  void TakeNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // With no write in flight: a closing stream says it is done writing, and
  // a closing or broken one gives up its hold (once).
  After NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ReleaseHoldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Run(const After& after);

  const std::function<void(const grpc::Status&)> on_failure_;
  // Shared with Cancel; atomic_load/atomic_store only.
  std::shared_ptr<grpc::ClientContext> context_;
  grpc::ByteBuffer ack_;
  absl::Mutex mu_;
  grpc::ByteBuffer current_ ABSL_GUARDED_BY(mu_);  // the write in flight
  std::deque<grpc::ByteBuffer> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
  bool held_ ABSL_GUARDED_BY(mu_) = true;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_LANE_STREAM_H_
