// gRPC ring transport: the raw message framing, sender lanes, the checked
// receive path, and the per-daemon collective service (a callback reactor
// per stream) that routes streams to transports.
#include "worker/grpc_transport.h"

#include <malloc.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "rpc/rpc_util.h"

namespace lockstep {

using lockstep::v1::RingHeader;

namespace {

constexpr char kPushMethod[] = "/lockstep.v1.Collective/Push";
// A header is a few dozen bytes; anything near this is not one.
constexpr uint32_t kMaxHeaderBytes = 4096;

// Reads a received message's slices in order.
class SliceCursor {
 public:
  explicit SliceCursor(const std::vector<grpc::Slice>& slices)
      : slices_(slices) {}

  // Copies the next n bytes into out; false when fewer are left.
  bool Read(size_t n, std::string* out) {
    out->clear();
    while (out->size() < n) {
      if (index_ == slices_.size()) return false;
      const grpc::Slice& s = slices_[index_];
      const size_t take = std::min(n - out->size(), s.size() - offset_);
      out->append(reinterpret_cast<const char*>(s.begin()) + offset_, take);
      Advance(take);
    }
    return true;
  }
  // The spans left, in order.
  std::vector<std::pair<const char*, size_t>> Rest() {
    std::vector<std::pair<const char*, size_t>> spans;
    for (; index_ < slices_.size(); ++index_, offset_ = 0) {
      const grpc::Slice& s = slices_[index_];
      if (s.size() > offset_) {
        spans.emplace_back(reinterpret_cast<const char*>(s.begin()) + offset_,
                           s.size() - offset_);
      }
    }
    return spans;
  }

 private:
  void Advance(size_t n) {
    offset_ += n;
    if (offset_ == slices_[index_].size()) {
      ++index_;
      offset_ = 0;
    }
  }

  const std::vector<grpc::Slice>& slices_;
  size_t index_ = 0;
  size_t offset_ = 0;
};

}  // namespace

void KeepMessageBuffersResident() {
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

RingPayload::RingPayload(std::string bytes, WireType type)
    : owned_(std::make_shared<const std::string>(std::move(bytes))),
      size_(owned_->size()),
      type_(type) {
  if (size_ > 0) spans_.emplace_back(owned_->data(), size_);
}

void RingPayload::AppendTo(PayloadSink& sink) const {
  for (const auto& [data, n] : spans_) sink.Append(data, n);
}

namespace {
void SendDone(void* sends) {
  auto* tracker = static_cast<SendTracker*>(sends);
  tracker->Done();
  delete tracker;
}
void ReleaseNothing(void*) {}
}  // namespace

grpc::ByteBuffer RingMessageCodec::Encode(RingHeader header, const void* data,
                                          int64_t count, WireType type,
                                          const SendTracker* sends) {
  const size_t payload = WireElementBytes(type) * static_cast<size_t>(count);
  header.set_payload_bytes(static_cast<int64_t>(payload));
  header.set_payload_type(type == WireType::kBfloat16 ? lockstep::v1::BFLOAT16
                                                      : lockstep::v1::FLOAT32);
  const uint32_t h = static_cast<uint32_t>(header.ByteSizeLong());
  std::string head(4, '\0');
  for (int i = 0; i < 4; ++i) head[i] = static_cast<char>((h >> (8 * i)) & 0xff);
  header.AppendToString(&head);
  grpc::Slice slices[2] = {grpc::Slice(head), grpc::Slice()};
  if (payload == 0) return grpc::ByteBuffer(slices, 1);
  // gRPC reads the values where they are; when it releases the slice, the
  // send is done.
  void* bytes = const_cast<void*>(data);
  if (sends != nullptr) {
    sends->Begin();
    slices[1] =
        grpc::Slice(bytes, payload, &SendDone, new SendTracker(*sends));
  } else {
    slices[1] = grpc::Slice(bytes, payload, &ReleaseNothing, nullptr);
  }
  return grpc::ByteBuffer(slices, 2);
}

absl::StatusOr<RingMessage> RingMessageCodec::Decode(
    const grpc::ByteBuffer& buffer) {
  RingMessage m;
  std::vector<grpc::Slice>& slices = m.payload.slices_;
  if (!buffer.Dump(&slices).ok()) {
    return absl::InvalidArgumentError("refused a message gRPC could not read");
  }
  const size_t total = buffer.Length();
  SliceCursor cursor(slices);
  std::string bytes;
  if (!cursor.Read(4, &bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "refused a message of ", total,
        " bytes: too short for a ring message (not one, or garbage)"));
  }
  uint32_t h = 0;
  for (int i = 0; i < 4; ++i) {
    h |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  }
  if (h > kMaxHeaderBytes || h > total - 4 || !cursor.Read(h, &bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "refused a message of ", total, " bytes whose header length says ", h,
        " bytes (not a ring message, or garbage)"));
  }
  if (!m.header.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(
        "refused a message whose ring header does not parse (garbage)");
  }
  const size_t payload = total - 4 - h;
  if (m.header.payload_bytes() != static_cast<int64_t>(payload)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "refused a message whose header says ", m.header.payload_bytes(),
        " payload bytes; ", payload, " came"));
  }
  switch (m.header.payload_type()) {
    case lockstep::v1::FLOAT32:
      m.payload.type_ = WireType::kFloat32;
      break;
    case lockstep::v1::BFLOAT16:
      m.payload.type_ = WireType::kBfloat16;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "refused a message whose header says payload type ",
          static_cast<int>(m.header.payload_type()),
          " (neither float32 nor bfloat16)"));
  }
  m.payload.spans_ = cursor.Rest();
  m.payload.size_ = payload;
  return m;
}

// One Push stream to the next rank: writes the queued messages one at a
// time. Sends start writes from outside the reactions,
// so one hold keeps the stream open until no more writes will come (closed
// or broken, and no write in flight). The transport waits for OnDone before
// deleting it.
class GrpcRingTransport::LaneStream
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  LaneStream(GrpcRingTransport* transport, grpc::GenericStub* stub)
      : transport_(transport), context_(std::make_shared<grpc::ClientContext>()) {
    context_->set_wait_for_ready(true);
    stub->PrepareBidiStreamingCall(context_.get(), kPushMethod,
                                   grpc::StubOptions(), this);
    AddHold();
    StartRead(&ack_);
    StartCall();
  }

  // Queues a message; false once the stream is broken or closing.
  bool Send(grpc::ByteBuffer* message) {
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

  // Drops what is queued and cancels the call: gRPC lets go of the payloads.
  void Cancel() {
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

  // No more sends: the stream closes once the queue has drained.
  void Close() {
    After after;
    {
      absl::MutexLock lock(&mu_);
      closing_ = true;
      after = NextLocked();
    }
    Run(after);
  }

  // True once gRPC is done with the stream (OnDone ran).
  bool WaitDone(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithDeadline(absl::Condition(&done_), deadline);
  }

  void OnWriteDone(bool ok) override {
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

  void OnReadDone(bool ok) override {
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

  void OnDone(const grpc::Status& status) override {
    std::deque<grpc::ByteBuffer> dropped;
    bool clean = false;
    {
      absl::MutexLock lock(&mu_);
      clean = closing_ && !broken_ && status.ok();
      dropped.swap(queue_);
    }
    if (!clean) {
      const int next = transport_->next_rank();
      transport_->Fail(
          FromGrpc(status, absl::StrFormat("sending to rank %d (%s)", next,
                                           transport_->options_.peers[next])),
          next);
    }
    dropped.clear();
    // The context holds the last reference to the call, and the call's
    // stream holds a message that was queued for writing when the call
    // failed: releasing it now, not when the transport goes, lets go of
    // that payload (and so of the collective waiting for its sends).
    std::atomic_store(&context_, std::shared_ptr<grpc::ClientContext>());
    absl::MutexLock lock(&mu_);
    done_ = true;
  }

 private:
  // What to start once the lock is released.
  struct After {
    bool write = false;        // StartWrite(&current_)
    bool writes_done = false;  // StartWritesDone()
    bool release = false;      // RemoveHold()
  };

  void TakeNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    current_.Swap(&queue_.front());
    queue_.pop_front();
  }

  // With no write in flight: a closing stream says it is done writing, and
  // a closing or broken one gives up its hold (once).
  After NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    After after;
    if (writing_ || (!closing_ && !broken_)) return after;
    if (closing_ && !broken_ && !writes_done_) {
      writes_done_ = true;
      after.writes_done = true;
    }
    after.release = ReleaseHoldLocked();
    return after;
  }

  bool ReleaseHoldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || !held_) return false;
    held_ = false;
    return true;
  }

  void Run(const After& after) {
    if (after.write) StartWrite(&current_);
    if (after.writes_done) StartWritesDone();
    if (after.release) RemoveHold();
  }

  GrpcRingTransport* const transport_;
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

GrpcRingTransport::GrpcRingTransport(GrpcRingOptions options)
    : options_(std::move(options)) {
  if (world_size() <= 1) return;  // a ring of one never talks
  const std::string& next = options_.peers[next_rank()];
  const int lanes = std::max(1, options_.lanes);
  // One channel per lane: separate TCP connections, separate HTTP/2 flow
  // control windows.
  for (int i = 0; i < lanes; ++i) {
    stubs_.push_back(std::make_unique<grpc::GenericStub>(
        MakeChannel(next, options_.tls, i + 1)));
    lanes_.push_back(new LaneStream(this, stubs_.back().get()));
  }
}

GrpcRingTransport::~GrpcRingTransport() {
  for (LaneStream* lane : lanes_) lane->Close();
  // A clean close takes a round trip; a peer that does not answer (gone,
  // or never reached) is cancelled.
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  for (LaneStream* lane : lanes_) {
    if (!lane->WaitDone(give_up)) {
      lane->Cancel();
      lane->WaitDone(absl::InfiniteFuture());
    }
  }
  for (LaneStream* lane : lanes_) delete lane;
}

absl::Status GrpcRingTransport::SendToNext(const CollectiveTag& tag,
                                           const void* data, int64_t count,
                                           WireType type,
                                           const SendTracker& sends) {
  {
    absl::MutexLock lock(&mu_);
    if (!error_.ok()) return error_;
  }
  if (world_size() <= 1) {
    return absl::FailedPreconditionError("a ring of one rank has no next");
  }
  RingHeader header;
  header.set_job(options_.job);
  header.set_generation(tag.generation);
  header.set_step(tag.step);
  header.set_bucket(tag.bucket);
  header.set_chunk(tag.chunk);
  header.set_from_rank(options_.rank);
  grpc::ByteBuffer message =
      RingMessageCodec::Encode(std::move(header), data, count, type, &sends);
  LaneStream* lane = lanes_[static_cast<size_t>(tag.chunk) % lanes_.size()];
  if (!lane->Send(&message)) {
    absl::MutexLock lock(&mu_);
    if (!error_.ok()) return error_;
    return absl::UnavailableError(absl::StrFormat(
        "the stream to rank %d (%s) is closed", next_rank(),
        options_.peers[next_rank()]));
  }
  return absl::OkStatus();
}

absl::Status GrpcRingTransport::RecvFromPrev(const CollectiveTag& tag,
                                             absl::Time deadline, float* dst,
                                             int64_t count, WireType type,
                                             RecvOp op) {
  RingPayload payload;
  {
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
        payload = std::move(it->second);
        mailbox_.erase(it);
        break;
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
  // Outside the lock: other receives go on while this one sums.
  if (payload.type() != type) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d sent %s values where %s were expected (do all workers run "
        "the same job's cluster.compression?)",
        prev_rank(), WireTypeName(payload.type()), WireTypeName(type)));
  }
  if (absl::Status s = CheckMessageLength(payload.size(), count, type);
      !s.ok()) {
    return s;
  }
  PayloadSink sink(dst, op, type);
  payload.AppendTo(sink);
  return absl::OkStatus();
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
  {
    absl::MutexLock lock(&mu_);
    if (error_.ok()) {
      error_ = status;
      suspect_ = suspect;
    }
    arrived_.SignalAll();
  }
  // Cancel the outgoing streams and drop what they still queue: gRPC lets
  // go of the payloads, so the collectives that sent them can return.
  for (LaneStream* lane : lanes_) lane->Cancel();
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

absl::Status GrpcRingTransport::Deliver(const RingHeader& header,
                                        RingPayload payload) {
  absl::Status refusal;
  if (header.job() != options_.job) {
    refusal = absl::FailedPreconditionError(absl::StrFormat(
        "refused a message for job \"%s\": this ring is job \"%s\"",
        header.job(), options_.job));
  } else if (header.generation() != options_.generation) {
    refusal = absl::FailedPreconditionError(absl::StrFormat(
        "refused a message of generation %d: the job is at generation %d "
        "(stale generation)",
        header.generation(), options_.generation));
  } else if (header.from_rank() != prev_rank()) {
    refusal = absl::FailedPreconditionError(absl::StrFormat(
        "refused a message from rank %d: only rank %d sends to rank %d",
        header.from_rank(), prev_rank(), rank()));
  } else if (payload.size() % WireElementBytes(payload.type()) != 0) {
    refusal = absl::InvalidArgumentError(absl::StrFormat(
        "refused a message of %d bytes: not a whole number of %s values",
        payload.size(), WireTypeName(payload.type())));
  }
  CollectiveTag tag{header.generation(), header.step(), header.bucket(),
                    header.chunk()};
  if (refusal.ok()) {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = mailbox_.try_emplace(tag);
    if (!inserted) {
      refusal = absl::FailedPreconditionError(
          absl::StrCat("refused a second message with ", TagToString(tag),
                       " from rank ", prev_rank()));
    } else {
      it->second = std::move(payload);
      arrived_.SignalAll();
      return absl::OkStatus();
    }
  }
  // A refused message from the right job and generation comes from a
  // misbehaving previous rank; anything else is a stranger, not a suspect.
  const bool from_peer = header.job() == options_.job &&
                         header.generation() == options_.generation;
  Fail(refusal, from_peer ? prev_rank() : -1);
  return refusal;
}

// One incoming Push stream. Reactions run on gRPC's threads and never block:
// a stream whose generation has not started here is parked with the
// service until it has (or its wait runs out).
class CollectiveService::PushReactor
    : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  PushReactor(CollectiveService* service, grpc::CallbackServerContext* context,
              grpc::ByteBuffer* response)
      : service_(service),
        context_(context),
        response_(response),
        peer_(context->peer()) {
    StartRead(&incoming_);
  }

  const RingHeader& first_header() const { return first_.header; }
  absl::Time give_up() const { return give_up_; }

  void OnReadDone(bool ok) override {
    if (!ok) {
      End();
      return;
    }
    absl::StatusOr<RingMessage> m = RingMessageCodec::Decode(incoming_);
    incoming_.Clear();
    if (!m.ok()) {
      Refuse(m.status());
      return;
    }
    if (transport() != nullptr) {
      DeliverAndReadOn(std::move(*m));
      return;
    }
    first_ = std::move(*m);
    give_up_ = absl::Now() + service_->attach_wait_;
    Route route;
    {
      absl::MutexLock lock(&service_->mu_);
      route = service_->Find(first_.header, give_up_);
      if (route.transport == nullptr && route.refusal.ok()) {
        service_->parked_.push_back(this);
        return;
      }
    }
    Continue(std::move(route));
  }

  // The stream's route is known (at once, or by the parking thread).
  void Continue(Route route) {
    if (!route.refusal.ok()) {
      Refuse(route.refusal);
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      transport_ = std::move(route.transport);
    }
    DeliverAndReadOn(std::move(first_));
  }

  void OnCancel() override {
    if (service_->Unpark(this)) {
      FinishOnce(grpc::Status::CANCELLED);
      return;
    }
    // The sender's connection was cut (it died, or the network did). gRPC
    // may report that as a failed read before it reports the cancellation,
    // so this is where a broken link is certain.
    std::shared_ptr<GrpcRingTransport> t;
    {
      absl::MutexLock lock(&mu_);
      if (closed_cleanly_ || refused_) return;
      t = transport_;
    }
    if (t != nullptr) t->LinkBroken("the sender's connection was cut");
  }

  void OnDone() override { delete this; }

 private:
  std::shared_ptr<GrpcRingTransport> transport() {
    absl::MutexLock lock(&mu_);
    return transport_;
  }

  void DeliverAndReadOn(RingMessage m) {
    absl::Status s = transport()->Deliver(m.header, std::move(m.payload));
    if (!s.ok()) {
      Refuse(s);
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      ++received_;
    }
    StartRead(&incoming_);
  }

  void End() {
    bool empty = false;
    {
      absl::MutexLock lock(&mu_);
      empty = received_ == 0 && transport_ == nullptr;
    }
    if (empty) {
      // Senders open a stream with its first message, so a stream without
      // one carried nothing.
      Refuse(absl::InvalidArgumentError(
          "refused a stream without a readable message (garbage bytes, or "
          "empty)"));
      return;
    }
    if (context_->IsCancelled()) {
      transport()->LinkBroken("the sender's connection was cut");
      FinishOnce(grpc::Status::CANCELLED);
      return;
    }
    lockstep::v1::PushAck ack;
    {
      absl::MutexLock lock(&mu_);
      closed_cleanly_ = true;
      ack.set_received(received_);
    }
    const grpc::Slice bytes(ack.SerializeAsString());
    *response_ = grpc::ByteBuffer(&bytes, 1);
    FinishOnce(grpc::Status::OK);
  }

  void Refuse(const absl::Status& why) {
    {
      absl::MutexLock lock(&mu_);
      refused_ = true;
    }
    service_->LogRefusal(peer_, why);
    FinishOnce(ToGrpc(why));
  }

  void FinishOnce(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
    }
    Finish(status);
  }

  CollectiveService* const service_;
  grpc::CallbackServerContext* const context_;
  grpc::ByteBuffer* const response_;
  const std::string peer_;
  grpc::ByteBuffer incoming_;
  RingMessage first_;  // held while parked
  absl::Time give_up_;
  absl::Mutex mu_;  // OnCancel may run beside the reads
  std::shared_ptr<GrpcRingTransport> transport_ ABSL_GUARDED_BY(mu_);
  int64_t received_ ABSL_GUARDED_BY(mu_) = 0;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_cleanly_ ABSL_GUARDED_BY(mu_) = false;
  bool refused_ ABSL_GUARDED_BY(mu_) = false;
};

CollectiveService::CollectiveService(absl::Duration attach_wait)
    : attach_wait_(attach_wait),
      parking_thread_([this] { ParkingLoop(); }) {}

CollectiveService::~CollectiveService() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  parking_thread_.join();
}

grpc::ServerReadReactor<grpc::ByteBuffer>* CollectiveService::Push(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  return new PushReactor(this, context, response);
}

CollectiveService::Route CollectiveService::Find(const RingHeader& header,
                                                 absl::Time give_up) {
  Route route;
  auto it = newest_.find(header.job());
  if (it != newest_.end() && it->second > header.generation()) {
    route.refusal = absl::FailedPreconditionError(absl::StrFormat(
        "refused a stream of generation %d of job \"%s\": it is at "
        "generation %d (stale generation)",
        header.generation(), header.job(), it->second));
    return route;
  }
  if (current_ != nullptr && current_->job() == header.job() &&
      current_->generation() >= header.generation()) {
    route.transport = current_;
    return route;
  }
  if (absl::Now() < give_up) return route;  // wait on
  if (current_ == nullptr || current_->job() != header.job()) {
    route.refusal = absl::FailedPreconditionError(absl::StrFormat(
        "refused a stream for job \"%s\" generation %d: this worker has "
        "no such job",
        header.job(), header.generation()));
  } else {
    route.refusal = absl::FailedPreconditionError(absl::StrFormat(
        "refused a stream of generation %d of job \"%s\": this worker is "
        "still at generation %d after %s",
        header.generation(), header.job(), current_->generation(),
        absl::FormatDuration(attach_wait_)));
  }
  return route;
}

bool CollectiveService::Unpark(PushReactor* reactor) {
  absl::MutexLock lock(&mu_);
  auto it = std::find(parked_.begin(), parked_.end(), reactor);
  if (it == parked_.end()) return false;
  parked_.erase(it);
  return true;
}

void CollectiveService::ParkingLoop() {
  mu_.Lock();
  while (!stopping_) {
    auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || !parked_.empty();
    };
    mu_.Await(absl::Condition(&wake));
    if (stopping_) break;
    // Poll while streams are parked: Attach and the give-up times both
    // end a wait.
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(5));
    std::vector<std::pair<PushReactor*, Route>> go;
    for (auto it = parked_.begin(); it != parked_.end();) {
      Route route = Find((*it)->first_header(), (*it)->give_up());
      if (route.transport == nullptr && route.refusal.ok()) {
        ++it;
        continue;
      }
      go.emplace_back(*it, std::move(route));
      it = parked_.erase(it);
    }
    mu_.Unlock();
    for (auto& [reactor, route] : go) reactor->Continue(std::move(route));
    mu_.Lock();
  }
  mu_.Unlock();
}

void CollectiveService::LogRefusal(const std::string& peer,
                                   const absl::Status& why) {
  if (log_) log_(absl::StrCat("collective: ", why.message(), " (from ", peer, ")"));
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

}  // namespace lockstep
