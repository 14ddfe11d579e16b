// What the coordinator's parts (GangStarts, Failures) tell the protocol
// they serve: a job's event (logged, counted as a change, journaled), a
// change a watch sees, a job's end, a journal write. The Coordinator
// implements it; every call is made under its state lock.
#ifndef LOCKSTEP_COORDINATOR_JOB_EVENTS_H_
#define LOCKSTEP_COORDINATOR_JOB_EVENTS_H_

#include <cstdint>
#include <string>

#include "coordinator/job_table.h"
#include "core/log.h"
#include "proto/jobs.pb.h"

namespace lockstep {

class JobEvents {
 public:
  virtual ~JobEvents() = default;
  // Appends `line` to the job's events, logs it, and journals the state.
  virtual void Event(JobTable::Job& job, const std::string& line) = 0;
  // The job's view changed (a watch wakes); not journaled.
  virtual void Changed(JobTable::Job& job) = 0;
  // The job ends in `state` (SUCCEEDED, FAILED or CANCELLED).
  virtual void EndJob(JobTable::Job& job, lockstep::v1::JobState state,
                      const std::string& message) = 0;
  // Writes the journal (a failure is logged; the state stays in memory).
  virtual void Persist() = 0;
  virtual void Log(const LogRecord& record) const = 0;

  // A `kind` request ("progress", "samples", "checkpoint_slice", "finish",
  // "nccl_id") of `job` from `sender` ("worker w2", "rank 1") names
  // `generation`, not the current one: it is refused; counted in
  // JobStatus.fenced and logged.
  void Fenced(JobTable::Job& job, const char* kind, int64_t generation,
              const std::string& sender) const;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_JOB_EVENTS_H_
