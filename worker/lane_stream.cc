// A lane of the ring (see lane_stream.h).
#include "worker/lane_stream.h"

#include <utility>

namespace lockstep {
namespace {

constexpr char kPushMethod[] = "/lockstep.v1.Collective/Push";

}  // namespace

RingLaneStream::RingLaneStream(
    grpc::GenericStub* stub,
    std::function<void(const grpc::Status&)> on_failure)
    : on_failure_(std::move(on_failure)),
      context_(std::make_shared<grpc::ClientContext>()) {
  context_->set_wait_for_ready(true);
  stub->PrepareBidiStreamingCall(context_.get(), kPushMethod,
                                 grpc::StubOptions(), this);
  AddHold();
  StartRead(&ack_);
  StartCall();
}

bool RingLaneStream::Send(grpc::ByteBuffer* message) {
  {
    absl::MutexLock lock(&mu_);
    if (broken_ || closing_) return false;
    queue_.emplace_back();
    queue_.back().Swap(message);
    if (writing_) return true;
    writing_ = true;
    TakeNextLocked();
  }
  StartWrite(&current_);
  return true;
}

void RingLaneStream::Cancel() {
  std::deque<grpc::ByteBuffer> dropped;
  bool release = false;
  {
    absl::MutexLock lock(&mu_);
    broken_ = true;
    dropped.swap(queue_);
    release = ReleaseHoldLocked();
  }
  // OnDone (which may run inside TryCancel) lets go of the context; this
  // reference keeps it alive until TryCancel returns.
  if (std::shared_ptr<grpc::ClientContext> context =
          std::atomic_load(&context_)) {
    context->TryCancel();
  }
  if (release) RemoveHold();
}

void RingLaneStream::Close() {
  After after;
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
    after = NextLocked();
  }
  Run(after);
}

bool RingLaneStream::WaitDone(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithDeadline(absl::Condition(&done_), deadline);
}

void RingLaneStream::OnWriteDone(bool ok) {
  std::deque<grpc::ByteBuffer> dropped;
  After after;
  {
    absl::MutexLock lock(&mu_);
    current_.Clear();  // gRPC holds its own reference now
    writing_ = false;
    if (!ok) {  // the call is over; OnDone brings the status
      broken_ = true;
      dropped.swap(queue_);
    } else if (!queue_.empty()) {
      writing_ = true;
      TakeNextLocked();
      after.write = true;
    }
    if (!after.write) after = NextLocked();
  }
  Run(after);
}

void RingLaneStream::OnReadDone(bool ok) {
  if (!ok) {  // the receiver ended the stream
    After after;
    {
      absl::MutexLock lock(&mu_);
      if (!closing_) broken_ = true;
      after = NextLocked();
    }
    Run(after);
    return;
  }
  // The receiver's PushAck when it closes the stream.
  ack_.Clear();
  StartRead(&ack_);
}

void RingLaneStream::OnDone(const grpc::Status& status) {
  std::deque<grpc::ByteBuffer> dropped;
  bool clean = false;
  {
    absl::MutexLock lock(&mu_);
    clean = closing_ && !broken_ && status.ok();
    dropped.swap(queue_);
  }
  if (!clean) on_failure_(status);
  dropped.clear();
  // The context holds the last reference to the call, and the call's
  // stream holds a message that was queued for writing when the call
  // failed: releasing it now, not when the transport goes, lets go of
  // that payload (and so of the collective waiting for its sends).
  std::atomic_store(&context_, std::shared_ptr<grpc::ClientContext>());
  absl::MutexLock lock(&mu_);
  done_ = true;
}

void RingLaneStream::TakeNextLocked() {
  current_.Swap(&queue_.front());
  queue_.pop_front();
}

RingLaneStream::After RingLaneStream::NextLocked() {
  After after;
  if (writing_ || (!closing_ && !broken_)) return after;
  if (closing_ && !broken_ && !writes_done_) {
    writes_done_ = true;
    after.writes_done = true;
  }
  after.release = ReleaseHoldLocked();
  return after;
}

bool RingLaneStream::ReleaseHoldLocked() {
  if (writing_ || !held_) return false;
  held_ = false;
  return true;
}

void RingLaneStream::Run(const After& after) {
  if (after.write) StartWrite(&current_);
  if (after.writes_done) StartWritesDone();
  if (after.release) RemoveHold();
}

}  // namespace lockstep
