// The Coordinator's options (coordinator/coordinator.h): where it keeps
// jobs and its journal, its timers, its log and its clock.
#ifndef LOCKSTEP_COORDINATOR_COORDINATOR_OPTIONS_H_
#define LOCKSTEP_COORDINATOR_COORDINATOR_OPTIONS_H_

#include <memory>
#include <string>

#include "base/time_source.h"
#include "coordinator/journal_store.h"
#include "core/log.h"

namespace lockstep {

struct CoordinatorOptions {
  std::string storage_dir;  // STORAGE/jobs/NAME/{checkpoints,summaries,...}
  // STORAGE/coordinator/storage_id, told to clients in every JobStatus so
  // that one which does not see this storage fetches files over the API.
  std::string storage_id;
  double heartbeat_interval_seconds = 0.5;  // told to workers
  double worker_timeout_seconds = 8;        // no heartbeat this long: lost
  // A rank its ring has waited on this long (while it still heartbeats) is
  // declared hung and lost; waits over hang_report_seconds are shown in
  // status and logged (under the workers' default ring keepalive, 5 s, so
  // a stall is seen before a stream gives up on its neighbour).
  double hang_timeout_seconds = 30;
  double hang_report_seconds = 3;
  // A lost worker is listed (status, list, the dashboard, /metrics) this
  // long after it was lost, then forgotten, unless a job that has not
  // ended still ranks it.
  double lost_workers_listed_seconds = 60;
  // The journal is written before every job or membership transition
  // takes effect, and read back by LoadJournal.
  bool journal = true;
  // Where: null, a FileJournalStore (STORAGE/coordinator/journal.pb).
  std::shared_ptr<JournalStore> journal_store;
  LogFn log;
  // What the timers above read (liveness, graces, back-off, the blame
  // window, the survivors' reports, listing lost workers); tests pass a
  // ManualTime and advance it. Not owned. Blocking waits with a caller's
  // deadline (WaitForChange, FetchNcclId) run on the real clock.
  const TimeSource* time = RealTime();
};

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_COORDINATOR_OPTIONS_H_
