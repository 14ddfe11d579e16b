// The NCCL bootstrap relay: rank 0's ncclUniqueId reaches every rank of a
// generation through the control plane, as Horovod broadcasts it; the
// coordinator never joins the communicator itself. Its own lock and
// condition variable: a rank waiting for the id wakes only when an id is
// published or a generation ends, and never holds the coordinator's state
// lock while it waits. Who may publish and fetch is the Coordinator's call.
#ifndef LOCKSTEP_COORDINATOR_NCCL_RELAY_H_
#define LOCKSTEP_COORDINATOR_NCCL_RELAY_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace lockstep {

class NcclIdRelay {
 public:
  // Keeps `id` for (job, generation). The same bytes again are fine;
  // AlreadyExists for another id of the same generation.
  absl::Status Publish(const std::string& job, int64_t generation,
                       const std::string& id);
  enum class Wait { kPublished, kEnded, kTimedOut };
  // Blocks until the id of (job, generation) is published (*id set), that
  // generation has ended (EndGeneration, before or during the wait) or
  // `deadline` passes.
  Wait Await(const std::string& job, int64_t generation, absl::Time deadline,
             std::string* id);
  // The job's generations up to `generation` are over: their id is
  // forgotten, their waiters wake.
  void EndGeneration(const std::string& job, int64_t generation);
  // How many Await calls for `job` are blocked now (tests wait for a
  // waiter instead of sleeping).
  int Waiting(const std::string& job);

 private:
  struct Entry {
    int64_t generation = 0;
    std::string id;
    int64_t ended_through = 0;  // the latest generation that ended
    int waiting = 0;
  };
  absl::Mutex mu_;
  absl::CondVar changed_;
  std::map<std::string, Entry> jobs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_NCCL_RELAY_H_
