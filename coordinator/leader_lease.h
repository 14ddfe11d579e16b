// Leader election among coordinators over etcd (DESIGN "Coordinator high
// availability"). Each coordinator holds an etcd lease (TTL 2 s, kept
// alive four times per TTL) and campaigns with one transaction: create
// the leader key with its address, under its lease, if the key is absent.
// The one that created it leads; its term is the key's create_revision,
// which every journal write compares (coordinator/etcd_journal_store.h),
// so etcd itself refuses a write from a coordinator whose key is gone.
// The others poll the key and campaign again when it disappears (its
// leader's lease expired or was revoked).
#ifndef LOCKSTEP_COORDINATOR_LEADER_LEASE_H_
#define LOCKSTEP_COORDINATOR_LEADER_LEASE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/etcd_client.h"
#include "core/log.h"

namespace lockstep {

struct LeaderLeaseOptions {
  std::string key;  // "/lockstep/leader"
  int64_t ttl_seconds = 2;
  // A standby reads the leader key this often.
  absl::Duration poll_every = absl::Milliseconds(200);
  LogFn log;
};

class LeaderLease {
 public:
  LeaderLease(EtcdClient* etcd, LeaderLeaseOptions options);
  // Stops the keep-alive and revokes the lease, so that a standby leads at
  // once instead of after the TTL.
  ~LeaderLease();

  // Blocks until this coordinator leads (returns its term) or `stop`
  // (Cancelled). Grants the lease first and keeps it alive from then on.
  // `address` (where workers and clients reach this coordinator) is the
  // key's value, which the standbys name. etcd unreachable: retried,
  // logged once per outage.
  absl::StatusOr<int64_t> Campaign(const std::string& address,
                                   const std::atomic<bool>& stop);

  // True while this coordinator leads and its lease is surely alive: the
  // last keep-alive that etcd answered was sent less than its TTL ago
  // (a steady clock; etcd counts the TTL from when it got it, later).
  bool Held() const;
  // Why it does not lead now ("" while Held()): "a standby; the leader is
  // 127.0.0.1:7071 (term 12)", "this coordinator's etcd lease expired
  // ...".
  std::string NotLeading() const;
  int64_t term() const;
  const std::string& key() const { return options_.key; }

 private:
  using Clock = std::chrono::steady_clock;
  void KeepAliveLoop();
  absl::Status Grant();

  EtcdClient* const etcd_;
  const LeaderLeaseOptions options_;
  mutable absl::Mutex mu_;
  int64_t lease_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t term_ ABSL_GUARDED_BY(mu_) = 0;
  bool leading_ ABSL_GUARDED_BY(mu_) = false;
  // The lease is alive until at least then (from the last answered
  // keep-alive); `expired` once etcd said it is gone.
  Clock::time_point valid_until_ ABSL_GUARDED_BY(mu_);
  bool expired_ ABSL_GUARDED_BY(mu_) = false;
  std::string leader_ ABSL_GUARDED_BY(mu_);  // as last read
  int64_t leader_term_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<bool> stop_{false};
  std::thread keepalive_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_LEADER_LEASE_H_
