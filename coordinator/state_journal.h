// The coordinator's state as a Journal (proto/journal.proto) in its
// JournalStore (coordinator/journal_store.h: a file, or etcd): written
// before a transition is acted on, and read back when a coordinator starts
// (coordinator.h, protocol step 7). What it holds: the sequence, the next
// registration number, the live members (id, registration, order, job,
// rank) and every job (its spec, status, ranks, start, collective,
// failures, back-off, planned recovery, the last 500 events, the finished
// ranks' reports, the memory start, the regroup asked). Called under the
// Coordinator's state lock.
#ifndef LOCKSTEP_COORDINATOR_STATE_JOURNAL_H_
#define LOCKSTEP_COORDINATOR_STATE_JOURNAL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/job_table.h"
#include "coordinator/journal_store.h"
#include "coordinator/membership.h"

namespace lockstep {

class StateJournal {
 public:
  explicit StateJournal(std::shared_ptr<JournalStore> store);

  // Writes the members and the jobs as the next sequence (saturating far
  // below int64's end).
  absl::Status Write(const Membership& members, const JobTable& jobs);
  // What Read found: whether there was a journal, and its counts.
  struct Found {
    bool journal = false;
    int jobs = 0;
    int workers = 0;
  };
  // Reads the journal into `members` and `jobs` (empty before). Members have
  // until `now` + their timeout to heartbeat; a RECOVERING job's replacement
  // wait starts at `now`; `open_files` opens each job's files (checkpoints,
  // summaries, audit). Each job not ended gets the event "coordinator
  // restarted: ..." and is listed in *resumed. DataLoss from the store, naming
  // what is damaged.
  absl::StatusOr<Found> Read(
      absl::Time now,
      const std::function<absl::Status(JobTable::Job&)>& open_files,
      Membership* members, JobTable* jobs,
      std::vector<JobTable::Job*>* resumed);

  int64_t sequence() const { return sequence_; }
  JournalStore& store() const { return *store_; }

 private:
  const std::shared_ptr<JournalStore> store_;
  int64_t sequence_ = 0;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_STATE_JOURNAL_H_
