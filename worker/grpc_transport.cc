// gRPC ring transport: sender lanes, the checked receive path, and the
// per-daemon collective service that routes streams to transports.
#include "worker/grpc_transport.h"

#include <malloc.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/rpc_util.h"

namespace lockstep {

using lockstep::v1::CollectiveChunk;

void KeepMessageBuffersResident() {
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

GrpcRingTransport::GrpcRingTransport(GrpcRingOptions options)
    : options_(std::move(options)) {
  if (world_size() <= 1) return;  // a ring of one never talks
  const std::string& next = options_.peers[next_rank()];
  const int lanes = std::max(1, options_.lanes);
  // One channel per lane: separate TCP connections, separate HTTP/2 flow
  // control windows.
  for (int i = 0; i < lanes; ++i) {
    lanes_.push_back(std::make_unique<Lane>());
    lanes_.back()->stub = lockstep::v1::Collective::NewStub(
        MakeChannel(next, options_.tls, i + 1));
  }
  for (int i = 0; i < lanes; ++i) {
    lanes_[i]->thread = std::thread([this, i] { SendLoop(i); });
  }
}

GrpcRingTransport::~GrpcRingTransport() {
  for (auto& lane : lanes_) {
    absl::MutexLock lock(&lane->mu);
    lane->closing = true;
    lane->cv.Signal();
  }
  for (auto& lane : lanes_) {
    if (lane->thread.joinable()) lane->thread.join();
  }
}

absl::Status GrpcRingTransport::SendToNext(const CollectiveTag& tag,
                                           const float* data, int64_t count) {
  {
    absl::MutexLock lock(&mu_);
    if (!error_.ok()) return error_;
  }
  if (world_size() <= 1) {
    return absl::FailedPreconditionError("a ring of one rank has no next");
  }
  auto msg = std::make_unique<CollectiveChunk>();
  msg->set_job(options_.job);
  msg->set_generation(tag.generation);
  msg->set_step(tag.step);
  msg->set_bucket(tag.bucket);
  msg->set_chunk(tag.chunk);
  msg->set_from_rank(options_.rank);
  msg->mutable_data()->assign(reinterpret_cast<const char*>(data),
                              sizeof(float) * static_cast<size_t>(count));
  Lane& lane = *lanes_[static_cast<size_t>(tag.chunk) % lanes_.size()];
  absl::MutexLock lock(&lane.mu);
  lane.queue.push_back(std::move(msg));
  lane.cv.Signal();
  return absl::OkStatus();
}

void GrpcRingTransport::SendLoop(int lane_index) {
  Lane& lane = *lanes_[lane_index];
  grpc::ClientContext context;
  context.set_wait_for_ready(true);
  lockstep::v1::PushAck ack;
  std::unique_ptr<grpc::ClientWriter<CollectiveChunk>> writer;
  {
    absl::MutexLock lock(&mu_);
    if (!error_.ok()) return;
    open_calls_.push_back(&context);
  }
  bool broken = false;
  while (true) {
    std::unique_ptr<CollectiveChunk> msg;
    {
      absl::MutexLock lock(&lane.mu);
      while (lane.queue.empty() && !lane.closing) lane.cv.Wait(&lane.mu);
      if (lane.queue.empty()) break;
      msg = std::move(lane.queue.front());
      lane.queue.pop_front();
    }
    if (broken) continue;  // drain: the error is already recorded
    if (writer == nullptr) writer = lane.stub->Push(&context, &ack);
    if (!writer->Write(*msg)) broken = true;
    if (broken) {
      grpc::Status s = writer->Finish();
      writer.reset();
      Fail(FromGrpc(s, absl::StrFormat("sending to rank %d (%s)", next_rank(),
                                       options_.peers[next_rank()])),
           next_rank());
    }
  }
  if (writer != nullptr) {
    writer->WritesDone();
    grpc::Status s = writer->Finish();
    (void)s;  // a clean close; errors were seen on Write
  }
  absl::MutexLock lock(&mu_);
  open_calls_.erase(
      std::remove(open_calls_.begin(), open_calls_.end(), &context),
      open_calls_.end());
}

absl::StatusOr<std::string> GrpcRingTransport::RecvFromPrev(
    const CollectiveTag& tag, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  waiting_.try_emplace(tag, absl::Now());
  struct Done {
    absl::flat_hash_map<CollectiveTag, absl::Time>& w;
    const CollectiveTag& t;
    ~Done() { w.erase(t); }
  } done{waiting_, tag};
  while (true) {
    auto it = mailbox_.find(tag);
    if (it != mailbox_.end()) {
      std::string bytes = std::move(it->second);
      mailbox_.erase(it);
      return bytes;
    }
    if (!error_.ok()) return error_;
    if (arrived_.WaitWithDeadline(&mu_, deadline)) {
      if (mailbox_.contains(tag) || !error_.ok()) continue;
      if (suspect_ < 0) suspect_ = prev_rank();
      return absl::DeadlineExceededError(absl::StrFormat(
          "waited for rank %d (%s) to send %s; nothing came", prev_rank(),
          options_.peers[prev_rank()], TagToString(tag)));
    }
  }
}

GrpcRingTransport::Wait GrpcRingTransport::OldestWait() {
  absl::MutexLock lock(&mu_);
  Wait out;
  absl::Time oldest = absl::InfiniteFuture();
  for (const auto& [tag, since] : waiting_) {
    if (since < oldest) {
      oldest = since;
      out.tag = tag;
    }
  }
  if (oldest == absl::InfiniteFuture()) return out;
  out.waiting = true;
  out.from_rank = prev_rank();
  out.seconds = absl::ToDoubleSeconds(absl::Now() - oldest);
  return out;
}

int GrpcRingTransport::suspect_rank() {
  absl::MutexLock lock(&mu_);
  return suspect_;
}

void GrpcRingTransport::Fail(const absl::Status& status, int suspect) {
  absl::MutexLock lock(&mu_);
  if (error_.ok()) {
    error_ = status;
    suspect_ = suspect;
  }
  // Cancel the outgoing calls so a sender blocked in Write returns.
  for (grpc::ClientContext* c : open_calls_) c->TryCancel();
  arrived_.SignalAll();
}

void GrpcRingTransport::Abort(const absl::Status& reason) {
  Fail(absl::AbortedError(reason.message()));
}

void GrpcRingTransport::LinkBroken(const std::string& detail) {
  Fail(absl::UnavailableError(
           absl::StrFormat("the stream from rank %d (%s) broke: %s",
                           prev_rank(), options_.peers[prev_rank()], detail)),
       prev_rank());
}

absl::Status GrpcRingTransport::Deliver(CollectiveChunk& chunk) {
  absl::Status refusal;
  if (chunk.job() != options_.job) {
    refusal = absl::FailedPreconditionError(absl::StrFormat(
        "refused a message for job \"%s\": this ring is job \"%s\"",
        chunk.job(), options_.job));
  } else if (chunk.generation() != options_.generation) {
    refusal = absl::FailedPreconditionError(absl::StrFormat(
        "refused a message of generation %d: the job is at generation %d "
        "(stale generation)",
        chunk.generation(), options_.generation));
  } else if (chunk.from_rank() != prev_rank()) {
    refusal = absl::FailedPreconditionError(absl::StrFormat(
        "refused a message from rank %d: only rank %d sends to rank %d",
        chunk.from_rank(), prev_rank(), rank()));
  } else if (chunk.data().size() % sizeof(float) != 0) {
    refusal = absl::InvalidArgumentError(absl::StrFormat(
        "refused a message of %d bytes: not a whole number of float32 values",
        chunk.data().size()));
  }
  CollectiveTag tag{chunk.generation(), chunk.step(), chunk.bucket(),
                    chunk.chunk()};
  if (refusal.ok()) {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = mailbox_.try_emplace(tag);
    if (!inserted) {
      refusal = absl::FailedPreconditionError(
          absl::StrCat("refused a second message with ", TagToString(tag),
                       " from rank ", prev_rank()));
    } else {
      it->second = std::move(*chunk.mutable_data());
      arrived_.SignalAll();
      return absl::OkStatus();
    }
  }
  // A refused message from the right job and generation comes from a
  // misbehaving previous rank; anything else is a stranger, not a suspect.
  const bool from_peer =
      chunk.job() == options_.job && chunk.generation() == options_.generation;
  Fail(refusal, from_peer ? prev_rank() : -1);
  return refusal;
}

void CollectiveService::Attach(std::shared_ptr<GrpcRingTransport> transport) {
  absl::MutexLock lock(&mu_);
  int64_t& newest = newest_[transport->job()];
  newest = std::max(newest, transport->generation());
  current_ = std::move(transport);
}

void CollectiveService::Detach(const GrpcRingTransport* transport) {
  absl::MutexLock lock(&mu_);
  if (current_.get() == transport) current_.reset();
}

void CollectiveService::AbortCurrent(const absl::Status& reason) {
  std::shared_ptr<GrpcRingTransport> current;
  {
    absl::MutexLock lock(&mu_);
    current = current_;
  }
  if (current != nullptr) current->Abort(reason);
}

GrpcRingTransport::Wait CollectiveService::CurrentWait() {
  std::shared_ptr<GrpcRingTransport> current;
  {
    absl::MutexLock lock(&mu_);
    current = current_;
  }
  return current == nullptr ? GrpcRingTransport::Wait{} : current->OldestWait();
}

grpc::Status CollectiveService::Refuse(grpc::ServerContext* context,
                                       const absl::Status& why) {
  if (log_)
    log_(absl::StrCat("collective: ", why.message(), " (from ", context->peer(),
                      ")"));
  return ToGrpc(why);
}

grpc::Status CollectiveService::Push(
    grpc::ServerContext* context, grpc::ServerReader<CollectiveChunk>* reader,
    lockstep::v1::PushAck* ack) {
  CollectiveChunk chunk;
  if (!reader->Read(&chunk)) {
    // Senders open a stream with its first message, so a stream without a
    // readable one carried garbage (gRPC could not parse it) or nothing.
    return Refuse(context, absl::InvalidArgumentError(
                               "refused a stream without a readable message "
                               "(garbage bytes, or empty)"));
  }
  // Find the transport of this stream's generation, waiting a little for a
  // peer that started the generation before us.
  std::shared_ptr<GrpcRingTransport> transport;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time give_up = absl::Now() + attach_wait_;
    auto ready = [&]() {
      auto it = newest_.find(chunk.job());
      if (it != newest_.end() && it->second > chunk.generation()) return true;
      return current_ != nullptr && current_->job() == chunk.job() &&
             current_->generation() >= chunk.generation();
    };
    mu_.AwaitWithDeadline(absl::Condition(&ready), give_up);
    auto it = newest_.find(chunk.job());
    if (it != newest_.end() && it->second > chunk.generation()) {
      return Refuse(
          context,
          absl::FailedPreconditionError(absl::StrFormat(
              "refused a stream of generation %d of job \"%s\": it is at "
              "generation %d (stale generation)",
              chunk.generation(), chunk.job(), it->second)));
    }
    if (current_ == nullptr || current_->job() != chunk.job()) {
      return Refuse(
          context,
          absl::FailedPreconditionError(absl::StrFormat(
              "refused a stream for job \"%s\" generation %d: this worker has "
              "no such job",
              chunk.job(), chunk.generation())));
    }
    transport = current_;
  }
  int64_t received = 0;
  do {
    absl::Status s = transport->Deliver(chunk);
    if (!s.ok()) return Refuse(context, s);
    ++received;
    chunk.Clear();
  } while (reader->Read(&chunk));
  if (context->IsCancelled()) {
    transport->LinkBroken("the sender's connection was cut");
    return grpc::Status::CANCELLED;
  }
  ack->set_received(received);
  return grpc::Status::OK;
}

}  // namespace lockstep
