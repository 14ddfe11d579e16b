// The collective service: a callback reactor per incoming stream, parked
// until its generation's transport is attached (see collective_service.h).
#include "worker/collective_service.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "rpc/rpc_util.h"

namespace lockstep {

using lockstep::v1::RingHeader;

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
    if (m.ok()) m->read_at = absl::Now();
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

  void OnDone() override {
    std::shared_ptr<GrpcRingTransport> t;
    {
      absl::MutexLock lock(&mu_);
      t = std::move(transport_);
    }
    if (t != nullptr) service_->Retire(std::move(t));
    delete this;
  }

 private:
  std::shared_ptr<GrpcRingTransport> transport() {
    absl::MutexLock lock(&mu_);
    return transport_;
  }

  void DeliverAndReadOn(RingMessage m) {
    absl::Status s =
        transport()->Deliver(m.header, std::move(m.payload), m.read_at);
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
    : attach_wait_(attach_wait), parking_thread_([this] { ParkingLoop(); }) {}

CollectiveService::~CollectiveService() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  parking_thread_.join();
  // The server was shut down first: no reactor retires a transport now.
  std::vector<std::shared_ptr<GrpcRingTransport>> retired;
  {
    absl::MutexLock lock(&mu_);
    retired.swap(retired_);
  }
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

void CollectiveService::Retire(std::shared_ptr<GrpcRingTransport> transport) {
  absl::MutexLock lock(&mu_);
  retired_.push_back(std::move(transport));
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
      return stopping_ || !parked_.empty() || !retired_.empty();
    };
    mu_.Await(absl::Condition(&wake));
    if (stopping_) break;
    if (!retired_.empty()) {
      std::vector<std::shared_ptr<GrpcRingTransport>> retired;
      retired.swap(retired_);
      mu_.Unlock();
      retired.clear();  // may join a transport's lane threads
      mu_.Lock();
      continue;
    }
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
  if (log_)
    log_(absl::StrCat("collective: ", why.message(), " (from ", peer, ")"));
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

GrpcRingTransport::LinkTiming CollectiveService::CurrentLink() {
  std::shared_ptr<GrpcRingTransport> current;
  {
    absl::MutexLock lock(&mu_);
    current = current_;
  }
  return current == nullptr ? GrpcRingTransport::LinkTiming{}
                            : current->RecentLink();
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
