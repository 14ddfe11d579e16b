// The gRPC ring transport (see grpc_ring_transport.h): lanes to the next
// rank, and the checked receive path from the previous one.
#include "worker/grpc_ring_transport.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "rpc/rpc_util.h"

namespace lockstep {

using lockstep::v1::RingHeader;

GrpcRingTransport::GrpcRingTransport(GrpcRingOptions options)
    : options_(std::move(options)) {
  if (world_size() <= 1) return;  // a ring of one never talks
  const std::string& next = options_.peers[next_rank()];
  const int lanes = std::max(1, options_.lanes);
  // One channel per lane: separate TCP connections, separate HTTP/2 flow
  // control windows.
  for (int i = 0; i < lanes; ++i) {
    channels_.push_back(
        MakeChannel(next, options_.tls, i + 1, options_.keepalive_timeout_ms));
    stubs_.push_back(std::make_unique<grpc::GenericStub>(channels_.back()));
    lanes_.push_back(new RingLaneStream(
        stubs_.back().get(), [this](const grpc::Status& status) {
          const int next = next_rank();
          Fail(FromGrpc(status, absl::StrFormat("sending to rank %d (%s)", next,
                                                options_.peers[next])),
               next);
        }));
  }
  connect_watch_ = std::thread([this] { WatchConnect(); });
}

void GrpcRingTransport::WatchConnect() {
  const absl::Duration limit = absl::Milliseconds(options_.connect_timeout_ms);
  const absl::Time give_up = absl::Now() + limit;
  for (const std::shared_ptr<grpc::Channel>& channel : channels_) {
    grpc_connectivity_state state = channel->GetState(/*try_to_connect=*/true);
    while (state != GRPC_CHANNEL_READY) {
      if (stop_watch_.HasBeenNotified()) return;
      {
        absl::MutexLock lock(&mu_);
        if (!error_.ok()) return;  // failed already: that is the report
      }
      const absl::Time now = absl::Now();
      if (now >= give_up) {
        const int next = next_rank();
        Fail(absl::UnavailableError(absl::StrFormat(
                 "could not connect to rank %d (%s) within %.1f s: the "
                 "connection is %s; is that worker's --advertise address "
                 "reachable from this one?",
                 next, options_.peers[next], absl::ToDoubleSeconds(limit),
                 state == GRPC_CHANNEL_TRANSIENT_FAILURE ? "refused or failing"
                                                         : "not answered")),
             next);
        return;
      }
      // Short waits, so the destructor's stop is seen quickly.
      channel->WaitForStateChange(
          state,
          absl::ToChronoTime(std::min(give_up, now + absl::Milliseconds(100))));
      state = channel->GetState(/*try_to_connect=*/true);
    }
  }
}

GrpcRingTransport::~GrpcRingTransport() {
  stop_watch_.Notify();
  if (connect_watch_.joinable()) connect_watch_.join();
  for (RingLaneStream* lane : lanes_) lane->Close();
  // A clean close takes a round trip; a peer that does not answer (gone,
  // or never reached) is cancelled.
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  for (RingLaneStream* lane : lanes_) {
    if (!lane->WaitDone(give_up)) {
      lane->Cancel();
      lane->WaitDone(absl::InfiniteFuture());
    }
  }
  for (RingLaneStream* lane : lanes_) delete lane;
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
  header.set_sent_unix_micros(absl::ToUnixMicros(absl::Now()));
  grpc::ByteBuffer message =
      RingMessageCodec::Encode(std::move(header), data, count, type, &sends,
                               options_.checksum);
  RingLaneStream* lane = lanes_[static_cast<size_t>(tag.chunk) % lanes_.size()];
  if (!lane->Send(&message)) {
    absl::MutexLock lock(&mu_);
    if (!error_.ok()) return error_;
    return absl::UnavailableError(
        absl::StrFormat("the stream to rank %d (%s) is closed", next_rank(),
                        options_.peers[next_rank()]));
  }
  return absl::OkStatus();
}

absl::Status GrpcRingTransport::RecvFromPrev(const CollectiveTag& tag,
                                             absl::Time deadline, float* dst,
                                             int64_t count, WireType type,
                                             RecvOp op) {
  RingMessage message;
  {
    absl::MutexLock lock(&mu_);
    asked_step_ = std::max(asked_step_, tag.step);
    waiting_.try_emplace(tag, absl::Now());
    struct Done {
      absl::flat_hash_map<CollectiveTag, absl::Time>& w;
      const CollectiveTag& t;
      ~Done() { w.erase(t); }
    } done{waiting_, tag};
    while (true) {
      auto it = mailbox_.find(tag);
      if (it != mailbox_.end()) {
        message = std::move(it->second);
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
  const RingPayload& payload = message.payload;
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
  if (!options_.checksum) {
    payload.AppendTo(sink);
    return absl::OkStatus();
  }
  const uint64_t sum = payload.AppendChecksummed(message.header, sink);
  if (sum != message.header.checksum()) {
    // Damaged between the two processes (a NIC, a switch, a middlebox):
    // what was written to dst is never used, as this receive fails its
    // collective and so the step (a step's update follows its last
    // collective). From inside the ring the faulty side cannot be told, so
    // the sender is named, as for any refusal from the rightful neighbour.
    const absl::Status refusal = absl::DataLossError(absl::StrFormat(
        "refused %s from rank %d: its checksum %016x does not match the "
        "sender's %016x (damaged on the way; the step is abandoned, its "
        "update never made)",
        TagToString(tag), prev_rank(), sum, message.header.checksum()));
    Fail(refusal, prev_rank());
    return refusal;
  }
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

GrpcRingTransport::LinkTiming GrpcRingTransport::RecentLink() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  return LinkTiming{link_bytes_.Value(now), link_seconds_.Value(now)};
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
  for (RingLaneStream* lane : lanes_) lane->Cancel();
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
                                        RingPayload payload,
                                        absl::Time arrived) {
  const CollectiveTag tag{header.generation(), header.step(), header.bucket(),
                          header.chunk()};
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
  if (refusal.ok()) {
    absl::MutexLock lock(&mu_);
    if (asked_step_ >= 0 && tag.step > asked_step_ + kMaxStepsAhead) {
      refusal = absl::FailedPreconditionError(absl::StrFormat(
          "refused %s from rank %d: this rank's collectives are at step %d, "
          "and its previous rank cannot be more than %d steps ahead (it "
          "needs this rank's part of every step)",
          TagToString(tag), prev_rank(), asked_step_, kMaxStepsAhead));
    } else if (mailbox_.size() >= kMaxUnreadMessages) {
      refusal = absl::ResourceExhaustedError(absl::StrFormat(
          "refused %s from rank %d: %d of its messages wait unread already",
          TagToString(tag), prev_rank(), mailbox_.size()));
    }
  }
  if (refusal.ok()) {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = mailbox_.try_emplace(tag);
    if (!inserted) {
      refusal = absl::FailedPreconditionError(
          absl::StrCat("refused a second message with ", TagToString(tag),
                       " from rank ", prev_rank()));
    } else {
      const double bytes = static_cast<double>(payload.size());
      it->second.header = header;
      it->second.payload = std::move(payload);
      arrived_.SignalAll();
      // Clocks of two hosts: a transit below their offset reads as 0.
      const double transit = std::max(
          0.0, absl::ToDoubleSeconds(
                   arrived - absl::FromUnixMicros(header.sent_unix_micros())));
      if (header.sent_unix_micros() > 0) {
        link_bytes_.Add(bytes, arrived);
        link_seconds_.Add(transit, arrived);
      }
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

}  // namespace lockstep
