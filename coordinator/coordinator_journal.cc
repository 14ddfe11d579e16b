// The Coordinator's journal (see coordinator.h, protocol steps 7 and 8):
// whether it may serve and write, and its state written and read back
// through its StateJournal (coordinator/state_journal.h).
#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "coordinator/coordinator.h"
#include "proto/journal.pb.h"
#include "rpc/rpc_util.h"

namespace lockstep {

std::string Coordinator::NotLeading() const {
  const std::string why = journal_.store().NotLeading();
  return why.empty() ? "" : absl::StrCat(kNotLeaderPrefix, why);
}

std::string Coordinator::NotServing() const {
  std::string why = NotLeading();
  if (why.empty() && !ready_.load()) {
    why = "the coordinator is replaying its journal";
  }
  return why;
}

void Coordinator::Persist() {
  if (!options_.journal) return;
  absl::Status s = journal_.Write(members_, jobs_);
  if (!s.ok()) {
    Log(
        absl::StrCat("error: cannot write the journal (a restart would lose "
                     "the last transition): ",
                     s.message()));
  }
}

absl::Status Coordinator::SaveJournal() {
  absl::MutexLock lock(&mu_);
  if (!options_.journal) return absl::OkStatus();
  return journal_.Write(members_, jobs_);
}

absl::Status Coordinator::LoadJournal() {
  absl::MutexLock lock(&mu_);
  std::vector<Job*> resumed;
  ASSIGN_OR_RETURN(const StateJournal::Found found,
                   journal_.Read(
                       Now(),
                       [this](Job& job) {
                         mu_.AssertHeld();  // Read runs under it
                         return submissions_.OpenJobFiles(job);
                       },
                       &members_, &jobs_, &resumed));
  if (!found.journal) {
    ready_ = true;
    return absl::OkStatus();
  }
  for (const Job* job : resumed) {
    nccl_.Republish(*job);
    LogRecord r(job->events.back());
    r.job = job->name;
    r.generation = job->status.generation();
    Log(r);
  }
  Persist();  // with the restart events
  Log(
      absl::StrFormat("journal %s (sequence %d): %d jobs (%d not finished), "
                      "%d workers expected to heartbeat again",
                      journal_.store().Where(), journal_.sequence(), found.jobs,
                      resumed.size(), found.workers));
  ready_ = true;
  return absl::OkStatus();
}

}  // namespace lockstep
