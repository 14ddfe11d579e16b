// JobEvents (see job_events.h).
#include "coordinator/job_events.h"

#include "absl/strings/str_format.h"

namespace lockstep {

void JobEvents::Fenced(JobTable::Job& job, const char* kind, int64_t generation,
                       const std::string& sender) const {
  ++(*job.status.mutable_fenced())[kind];
  LogRecord r(absl::StrFormat(
      "refused: a %s request of generation %d from %s (the job is %s at "
      "generation %d)",
      kind, generation, sender, JobStateName(job.status.state()),
      job.status.generation()));
  r.job = job.name;
  r.generation = job.status.generation();
  Log(r);
}

}  // namespace lockstep
