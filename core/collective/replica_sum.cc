// Barrier sums of a replica set's passes (see replica_sum.h).
#include "core/collective/replica_sum.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep {

class ReplicaSum::View final : public PassCollective {
 public:
  View(ReplicaSum* owner, int replica) : owner_(owner), replica_(replica) {}
  absl::Status Sum(int32_t key, float* data, int64_t count) override {
    return owner_->Sum(replica_, key, data, count);
  }

 private:
  ReplicaSum* const owner_;
  const int replica_;
};

ReplicaSum::ReplicaSum(int replicas) : n_(replicas), data_(replicas) {
  for (int r = 0; r < n_; ++r) views_.push_back(std::make_unique<View>(this, r));
}

void ReplicaSum::BeginStep(CrossSum cross) {
  std::lock_guard<std::mutex> l(mu_);
  cross_ = std::move(cross);
  error_ = absl::OkStatus();
  arrived_ = 0;
  finished_ = 0;
}

absl::Status ReplicaSum::Fail(absl::Status error) {
  if (error_.ok()) error_ = std::move(error);
  arrived_ = 0;
  cv_.notify_all();
  return error_;
}

int ReplicaSum::waiting() {
  std::lock_guard<std::mutex> lock(mu_);
  return arrived_;
}

void ReplicaSum::Finished(int replica) {
  std::lock_guard<std::mutex> l(mu_);
  ++finished_;
  if (arrived_ > 0) {
    Fail(absl::InternalError(absl::StrCat(
        "replica ", replica, " ended its pass while replica ", first_replica_,
        " waits in the sum across replicas ", key_,
        " (the replicas' passes differ)")))
        .IgnoreError();  // kept in error_
  }
}

void ReplicaSum::Abort(absl::Status reason) {
  std::lock_guard<std::mutex> l(mu_);
  Fail(std::move(reason)).IgnoreError();  // kept in error_
}

absl::Status ReplicaSum::status() {
  std::lock_guard<std::mutex> l(mu_);
  return error_;
}

absl::Status ReplicaSum::Sum(int replica, int32_t key, float* data,
                             int64_t count) {
  std::unique_lock<std::mutex> l(mu_);
  if (!error_.ok()) return error_;
  if (finished_ > 0) {
    return Fail(absl::InternalError(absl::StrCat(
        "replica ", replica, " waits in the sum across replicas ", key,
        " after another replica ended its pass (the replicas' passes "
        "differ)")));
  }
  if (arrived_ == 0) {
    key_ = key;
    count_ = count;
    first_replica_ = replica;
  } else if (key != key_ || count != count_) {
    return Fail(absl::InternalError(absl::StrCat(
        "replica ", replica, " sums ", count, " values for key ", key,
        " while replica ", first_replica_, " sums ", count_, " for key ", key_,
        " (the replicas' passes differ)")));
  }
  data_[replica] = data;
  if (++arrived_ < n_) {
    const int64_t round = round_;
    cv_.wait(l, [&] { return round_ != round || !error_.ok(); });
    return round_ != round ? absl::OkStatus() : error_;
  }
  // The last to arrive: replica order, then the workers.
  sum_.assign(data_[0], data_[0] + count);
  for (int r = 1; r < n_; ++r) {
    const float* src = data_[r];
    for (int64_t k = 0; k < count; ++k) sum_[k] += src[k];
  }
  if (cross_) {
    // The others stay at the barrier (arrived_ == n_) meanwhile.
    CrossSum cross = cross_;
    l.unlock();
    absl::Status s = cross(key, sum_.data(), count);
    l.lock();
    if (!s.ok()) return Fail(std::move(s));
  }
  for (int r = 0; r < n_; ++r) {
    std::memcpy(data_[r], sum_.data(), sizeof(float) * count);
  }
  arrived_ = 0;
  ++round_;
  cv_.notify_all();
  return absl::OkStatus();
}

}  // namespace lockstep
