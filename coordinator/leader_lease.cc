#include "coordinator/leader_lease.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace lockstep {

LeaderLease::LeaderLease(EtcdClient* etcd, LeaderLeaseOptions options)
    : etcd_(etcd), options_(std::move(options)) {}

LeaderLease::~LeaderLease() {
  stop_ = true;
  if (keepalive_.joinable()) keepalive_.join();
  int64_t lease = 0;
  {
    absl::MutexLock lock(&mu_);
    lease = lease_;
  }
  if (lease != 0) (void)etcd_->RevokeLease(lease);
}

absl::Status LeaderLease::Grant() {
  const Clock::time_point sent = Clock::now();
  absl::StatusOr<etcdserverpb::LeaseGrantResponse> granted =
      etcd_->GrantLease(options_.ttl_seconds);
  if (!granted.ok()) return granted.status();
  absl::MutexLock lock(&mu_);
  lease_ = granted->id();
  expired_ = false;
  valid_until_ = sent + std::chrono::seconds(granted->ttl());
  return absl::OkStatus();
}

void LeaderLease::KeepAliveLoop() {
  const auto every = std::chrono::milliseconds(options_.ttl_seconds * 1000 / 4);
  while (!stop_.load()) {
    int64_t lease = 0;
    {
      absl::MutexLock lock(&mu_);
      lease = expired_ ? 0 : lease_;
    }
    if (lease != 0) {
      Clock::time_point sent = Clock::now();
      absl::StatusOr<int64_t> ttl = etcd_->KeepAlive(
          lease, absl::Milliseconds(options_.ttl_seconds * 1000 / 4), &sent);
      absl::MutexLock lock(&mu_);
      if (ttl.ok() && lease == lease_) {
        if (*ttl > 0) {
          valid_until_ = sent + std::chrono::seconds(*ttl);
        } else {
          expired_ = true;
        }
      }
    }
    const Clock::time_point until = Clock::now() + every;
    while (!stop_.load() && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

absl::StatusOr<int64_t> LeaderLease::Campaign(const std::string& address,
                                              const std::atomic<bool>& stop) {
  bool told_unreachable = false, told_standby = false;
  auto log = [this](const std::string& line) {
    if (options_.log) options_.log(line);
  };
  while (!stop.load()) {
    bool need_lease = false;
    {
      absl::MutexLock lock(&mu_);
      need_lease = lease_ == 0 || expired_ || Clock::now() >= valid_until_;
    }
    absl::Status status = need_lease ? Grant() : absl::OkStatus();
    if (status.ok() && !keepalive_.joinable()) {
      keepalive_ = std::thread([this] { KeepAliveLoop(); });
    }
    int64_t lease = 0;
    {
      absl::MutexLock lock(&mu_);
      lease = lease_;
    }
    etcdserverpb::TxnRequest txn;
    *txn.add_compare() = EtcdClient::CreateRevisionIs(options_.key, 0);
    etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
    put->set_key(options_.key);
    put->set_value(address);
    put->set_lease(lease);
    txn.add_failure()->mutable_request_range()->set_key(options_.key);
    absl::StatusOr<etcdserverpb::TxnResponse> result =
        status.ok() ? etcd_->Txn(txn)
                    : absl::StatusOr<etcdserverpb::TxnResponse>(status);
    if (!result.ok()) {
      if (!told_unreachable) {
        log(absl::StrCat("etcd: ", result.status().message(),
                         " (retrying; this coordinator stands by)"));
        told_unreachable = true;
      }
    } else if (result->succeeded()) {
      absl::MutexLock lock(&mu_);
      leading_ = true;
      term_ = result->header().revision();
      leader_ = address;
      leader_term_ = term_;
      log(
          absl::StrFormat("leading the coordinators (etcd key %s, term %d, "
                          "lease TTL %d s)",
                          options_.key, term_, options_.ttl_seconds));
      return term_;
    } else {
      told_unreachable = false;
      std::string leader;
      int64_t leader_term = 0;
      if (const etcdserverpb::KeyValue* kv =
              EtcdClient::FailureRangeKey(*result)) {
        leader = kv->value();
        leader_term = kv->create_revision();
      }
      {
        absl::MutexLock lock(&mu_);
        leader_ = leader;
        leader_term_ = leader_term;
      }
      if (!told_standby && !leader.empty()) {
        log(absl::StrFormat("standing by: the leader is %s (term %d)", leader,
                            leader_term));
        told_standby = true;
      }
    }
    const Clock::time_point until =
        Clock::now() + std::chrono::milliseconds(
                           absl::ToInt64Milliseconds(options_.poll_every));
    while (!stop.load() && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return absl::CancelledError("stopped before leading");
}

bool LeaderLease::Held() const {
  absl::MutexLock lock(&mu_);
  return leading_ && !expired_ && Clock::now() < valid_until_;
}

int64_t LeaderLease::term() const {
  absl::MutexLock lock(&mu_);
  return term_;
}

std::string LeaderLease::NotLeading() const {
  absl::MutexLock lock(&mu_);
  if (!leading_) {
    return leader_.empty()
               ? std::string("a standby (no leader yet)")
               : absl::StrFormat("a standby; the leader is %s (term %d)",
                                 leader_, leader_term_);
  }
  if (expired_) {
    return absl::StrFormat(
        "this coordinator's etcd lease expired (term %d ended): it no "
        "longer leads",
        term_);
  }
  if (Clock::now() >= valid_until_) {
    return absl::StrFormat(
        "this coordinator's etcd lease may have expired (no keep-alive "
        "answered for %d s; term %d): it no longer leads",
        options_.ttl_seconds, term_);
  }
  return "";
}

}  // namespace lockstep
