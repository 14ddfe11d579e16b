// The coordinators' journal in etcd (DESIGN "Coordinator high
// availability"): PREFIX/journal/membership holds the Journal without its
// jobs (sequence, next worker, workers) and PREFIX/journal/job/NNNNNN
// each job (JournalJob, NNNNNN: its place in submission order), so a
// write sends only the keys that changed. Every write is one etcd
// transaction whose compare is create_revision(leader key) == this
// coordinator's term: etcd applies it only while the key this
// coordinator created still exists, so one whose lease lapsed (paused,
// cut off) cannot write, whatever it believes. It does not even try once
// its own clock says the lease may have lapsed (LeaderLease::Held). Both
// refusals are counted (refused_writes) and make NotLeading() non-empty.
#ifndef LOCKSTEP_COORDINATOR_ETCD_JOURNAL_STORE_H_
#define LOCKSTEP_COORDINATOR_ETCD_JOURNAL_STORE_H_

#include <atomic>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/etcd_client.h"
#include "coordinator/journal_store.h"
#include "coordinator/leader_lease.h"

namespace lockstep {

class EtcdJournalStore : public JournalStore {
 public:
  // `prefix`: "/lockstep" (no trailing slash). Not owned.
  EtcdJournalStore(EtcdClient* etcd, const LeaderLease* lease,
                   std::string prefix);
  std::string Where() const override;
  absl::StatusOr<std::optional<lockstep::v1::Journal>> Read() override;
  // FailedPrecondition "journal write refused: ..." when this coordinator
  // does not lead (the lease, or etcd's compare); UNAVAILABLE when etcd
  // cannot be reached.
  absl::Status Write(const lockstep::v1::Journal& journal) override;
  std::string NotLeading() const override;
  int64_t refused_writes() const override { return refused_.load(); }
  int64_t term() const override;

  // A transaction carries at most this many writes (etcd's --max-txn-ops
  // is 128 by default); more go in several, each fenced alike.
  static constexpr int kMaxOpsPerTxn = 100;

 private:
  const std::string journal_prefix_;  // PREFIX/journal/
  EtcdClient* const etcd_;
  const LeaderLease* const lease_;
  mutable absl::Mutex mu_;
  // The bytes last written or read, per key: unchanged keys are not sent.
  std::map<std::string, std::string> written_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> refused_{0};
  // Set by a refused transaction (etcd's word beats the local clock).
  std::atomic<bool> deposed_{false};
  std::string deposed_why_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_ETCD_JOURNAL_STORE_H_
