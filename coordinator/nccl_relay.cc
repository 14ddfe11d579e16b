// The NCCL bootstrap relay (see nccl_relay.h).
#include "coordinator/nccl_relay.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace lockstep {

absl::Status NcclIdRelay::Publish(const std::string& job, int64_t generation,
                                  const std::string& id) {
  absl::MutexLock lock(&mu_);
  Entry& e = jobs_[job];
  if (e.generation == generation && !e.id.empty() && e.id != id) {
    return absl::AlreadyExistsError(absl::StrFormat(
        "job %s generation %d already has another NCCL id", job, generation));
  }
  // A generation that ended or was followed is not kept.
  if (generation <= e.ended_through || generation < e.generation) {
    return absl::OkStatus();
  }
  e.generation = generation;
  e.id = id;
  changed_.SignalAll();
  return absl::OkStatus();
}

NcclIdRelay::Wait NcclIdRelay::Await(const std::string& job, int64_t generation,
                                     absl::Time deadline, std::string* id) {
  absl::MutexLock lock(&mu_);
  while (true) {
    const Entry& e = jobs_[job];
    if (e.generation == generation && !e.id.empty()) {
      *id = e.id;
      return Wait::kPublished;
    }
    if (e.ended_through >= generation) return Wait::kEnded;
    if (absl::Now() >= deadline) return Wait::kTimedOut;
    ++jobs_[job].waiting;
    changed_.WaitWithDeadline(&mu_, deadline);
    --jobs_[job].waiting;
  }
}

int NcclIdRelay::Waiting(const std::string& job) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job);
  return it == jobs_.end() ? 0 : it->second.waiting;
}

void NcclIdRelay::EndGeneration(const std::string& job, int64_t generation) {
  absl::MutexLock lock(&mu_);
  Entry& e = jobs_[job];
  e.ended_through = std::max(e.ended_through, generation);
  if (e.generation <= generation) e.id.clear();
  changed_.SignalAll();
}

}  // namespace lockstep
