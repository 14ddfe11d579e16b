// The chief's state machine (see coordinator.h): the parts wired over one
// state lock, the JobEvents steps (a job's event, its end), the ops view,
// the shutdown and the tick.
#include "coordinator/coordinator.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace lockstep {

using lockstep::v1::JobState;

Coordinator::Coordinator(CoordinatorOptions options)
    : options_(std::move(options)),
      journal_(options_.journal_store != nullptr
                   ? options_.journal_store
                   : std::make_shared<FileJournalStore>(options_.storage_dir)),
      members_(options_.time),
      starts_(members_, jobs_, *this, options_.time, shutting_down_),
      failures_(options_, members_, jobs_, *this, starts_, nccl_ids_),
      views_(options_, mu_, changed_, members_, jobs_),
      registrations_(options_, mu_, members_, jobs_, *this, starts_, failures_),
      submissions_(options_, mu_, jobs_, *this, starts_, views_,
                   shutting_down_),
      reports_(options_, mu_, members_, jobs_, *this, starts_, failures_),
      checkpoints_(mu_, jobs_, *this, failures_,
                   [this] { return NotLeading(); }),
      nccl_(mu_, jobs_, *this, nccl_ids_) {}

Coordinator::OpsView Coordinator::Ops() const {
  OpsView v = views_.Ops();
  v.not_serving = NotServing();
  v.refused_journal_writes = journal_.store().refused_writes();
  return v;
}

void Coordinator::Tick() {
  absl::MutexLock lock(&mu_);
  failures_.Check();
}

void Coordinator::Changed(Job& job) {
  ++job.version;
  changed_.SignalAll();
}

// Every job transition ends with an event, so this is where the journal is
// written for them.
void Coordinator::Event(Job& job, const std::string& line) {
  job.events.push_back(line);
  LogRecord r(line);
  // A failed job is an error; a generation lost (recovering) a warning.
  if (absl::StartsWith(line, "FAILED")) r.level = "error";
  if (absl::StartsWith(line, "RECOVERING")) r.level = "warning";
  r.job = job.name;
  r.generation = job.status.generation();
  if (job.status.step() > 0) r.step = job.status.step();
  Log(r);
  Changed(job);
  // Events are journaled too, so a watch resumed after a coordinator
  // restart continues at the right one.
  Persist();
}

void Coordinator::BeginShutdown() {
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
}

void Coordinator::EndJob(Job& job, JobState state, const std::string& message) {
  if (IsTerminal(job.status.state())) return;
  nccl_ids_.EndGeneration(job.name, job.status.generation());
  // Its workers are free for other jobs; one still running it gets STOP
  // at its next heartbeat (its job is no longer its assignment).
  members_.Release(job.name, job.ranks);
  job.status.set_state(state);
  job.status.set_message(message);
  job.status.set_wall_seconds(absl::ToDoubleSeconds(Now() - job.submitted));
  if (job.reports != nullptr) {
    absl::Status s = job.reports->Flush();
    if (!s.ok()) Log(std::string(s.message()));
  }
  Event(job, absl::StrCat(JobStateName(state), message.empty() ? "" : ": ",
                          message));
}

}  // namespace lockstep
