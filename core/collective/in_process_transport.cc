// In-process Transport: per-rank mailboxes keyed by tag, guarded by a mutex,
// with deadlines, Abort and the refusal of stale messages.
#include "core/collective/in_process_transport.h"

#include <cstring>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace lockstep {

class InProcessRing::Endpoint : public Transport {
 public:
  Endpoint(int rank, int world) : rank_(rank), world_(world) {}

  void set_next(Endpoint* next) { next_ = next; }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }

  // Copies the values at once, so `sends` never counts anything.
  absl::Status SendToNext(const CollectiveTag& tag, const void* data,
                          int64_t count, WireType type,
                          const SendTracker& sends) override {
    {
      absl::MutexLock lock(&mu_);
      if (aborted_.has_value()) return *aborted_;
    }
    if (count < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank_, ": negative send count ", count));
    }
    Message m{type, std::string(static_cast<size_t>(count) *
                                    WireElementBytes(type),
                                '\0')};
    if (count > 0) std::memcpy(&m.bytes[0], data, m.bytes.size());
    next_->Deliver(tag, std::move(m));
    return absl::OkStatus();
  }

  absl::Status RecvFromPrev(const CollectiveTag& tag, absl::Time deadline,
                            float* dst, int64_t count, WireType type,
                            RecvOp op) override {
    absl::StatusOr<Message> m = Take(tag, deadline);
    if (!m.ok()) return m.status();
    if (m->type != type) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", Prev(), " sent ", WireTypeName(m->type),
                       " values where ", WireTypeName(type),
                       " were expected"));
    }
    if (absl::Status s = CheckMessageLength(m->bytes.size(), count, type);
        !s.ok()) {
      return s;
    }
    PayloadSink(dst, op, type).Append(m->bytes.data(), m->bytes.size());
    return absl::OkStatus();
  }

  void Abort(const absl::Status& reason) override {
    absl::MutexLock lock(&mu_);
    if (aborted_.has_value()) return;  // the first reason wins
    aborted_ = absl::AbortedError(
        absl::StrCat("rank ", rank_, " aborted: ", reason.message()));
    mailbox_.clear();
    cv_.SignalAll();
  }

  // A message from the previous rank arrives: kept, or refused.
  struct Message {
    WireType type;
    std::string bytes;
  };

  void Deliver(const CollectiveTag& tag, Message m) {
    absl::MutexLock lock(&mu_);
    if (aborted_.has_value()) return;  // nobody will read it
    if (tag.generation < generation_) {
      Refuse(absl::StrCat(
          "rank ", Prev(), " sent a message for stale generation ",
          tag.generation, " (current ", generation_, "): refused"));
      return;
    }
    if (!mailbox_.emplace(tag, std::move(m)).second) {
      Refuse(absl::StrCat("rank ", Prev(), " sent a second message for ",
                          TagToString(tag), ": refused"));
      return;
    }
    cv_.SignalAll();  // waiters for other tags go back to sleep
  }

  void SetCurrentGeneration(int64_t generation) {
    absl::MutexLock lock(&mu_);
    generation_ = generation;
  }

 private:
  // Waits for the message with `tag` and takes it out of the mailbox.
  absl::StatusOr<Message> Take(const CollectiveTag& tag,
                               absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    while (true) {
      if (aborted_.has_value()) return *aborted_;
      if (refused_.has_value()) return *refused_;
      auto it = mailbox_.find(tag);
      if (it != mailbox_.end()) {
        Message m = std::move(it->second);
        mailbox_.erase(it);
        return m;
      }
      // WaitWithDeadline returns true on timeout; re-check once so a
      // message that arrived with the deadline still wins.
      if (cv_.WaitWithDeadline(&mu_, deadline) && !mailbox_.contains(tag) &&
          !aborted_.has_value() && !refused_.has_value()) {
        return absl::DeadlineExceededError(
            absl::StrCat("rank ", rank_, " timed out waiting for rank ", Prev(),
                         " (", TagToString(tag), ")"));
      }
    }
  }

  int Prev() const { return (rank_ + world_ - 1) % world_; }

  void Refuse(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!refused_.has_value()) refused_ = absl::FailedPreconditionError(why);
    cv_.SignalAll();
  }

  const int rank_;
  const int world_;
  Endpoint* next_ = nullptr;  // set once by the ring before any use

  absl::Mutex mu_;
  absl::CondVar cv_;  // signalled on every arrival, refusal and abort
  absl::flat_hash_map<CollectiveTag, Message> mailbox_ ABSL_GUARDED_BY(mu_);
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<absl::Status> aborted_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Status> refused_ ABSL_GUARDED_BY(mu_);
};

std::unique_ptr<InProcessRing> InProcessRing::Create(int world) {
  if (world < 1) return nullptr;
  return std::unique_ptr<InProcessRing>(new InProcessRing(world));
}

InProcessRing::InProcessRing(int world) {
  for (int r = 0; r < world; ++r) {
    endpoints_.push_back(std::make_unique<Endpoint>(r, world));
  }
  for (int r = 0; r < world; ++r) {
    endpoints_[r]->set_next(endpoints_[(r + 1) % world].get());
  }
}

InProcessRing::~InProcessRing() = default;

Transport& InProcessRing::endpoint(int rank) { return *endpoints_.at(rank); }

void InProcessRing::AbortAll(const absl::Status& reason) {
  for (auto& endpoint : endpoints_) endpoint->Abort(reason);
}

void InProcessRing::InjectFromPrev(int rank, const CollectiveTag& tag,
                                   std::string bytes) {
  endpoints_.at(rank)->Deliver(tag, {WireType::kFloat32, std::move(bytes)});
}

void InProcessRing::SetCurrentGeneration(int rank, int64_t generation) {
  endpoints_.at(rank)->SetCurrentGeneration(generation);
}

}  // namespace lockstep
