// The coordinator's members (coordinator.h, protocol step 1): the workers
// registered here, by id, and the rules of their identity; their heartbeats'
// figures and waits; the lost ones listed a while, then forgotten. Owned by
// the Coordinator, under its state lock together with the jobs (one
// transition changes both: a rank taken, a member lost and its job's
// generation ended), so not locked here.
#ifndef LOCKSTEP_COORDINATOR_MEMBERSHIP_H_
#define LOCKSTEP_COORDINATOR_MEMBERSHIP_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/time_source.h"
#include "proto/cluster.pb.h"

namespace lockstep {

class Membership {
 public:
  struct Worker {
    lockstep::v1::RegisterRequest info;
    std::string id;
    int64_t order = 0;  // registration order (rank assignment order)
    absl::Time last_heartbeat;
    bool lost = false;
    // When it was lost; lost_workers_listed_seconds later it is forgotten
    // (no longer listed) unless a job that has not ended still ranks it.
    absl::Time lost_at = absl::InfiniteFuture();
    // Set when a newer registration took its name: its heartbeats are told
    // to exit.
    std::string replaced_by;
    std::string job;  // assigned job ("" idle)
    int rank = -1;
    std::string name;  // stable identity
    // The oldest collective receive it is blocked in, as of `wait_at`.
    lockstep::v1::CollectiveWait wait;
    absl::Time wait_at;
    // Its recent link and work figures, as of its last heartbeat.
    lockstep::v1::RankTiming timing;
    std::string wait_logged;  // the wait already logged
    // What it reported keeping in memory when a generation of `held_job`
    // ended early (FinishRequest.held_step), for the next generation.
    std::string held_job;
    int64_t held_generation = 0;
    int64_t held_step = 0;
    std::string held_fingerprint;
    // Kept parts (sharded with copies): of ranks held_rank and held_rank-1
    // of a world of held_world (> 0).
    int held_rank = -1;
    int held_world = 0;
    int64_t held_next_step = 0;  // and this step too (0: none)
    // The held_* fields from a FinishRequest or a RegisterRequest (the
    // same fields), of `job`'s generation `generation`.
    template <typename Request>
    void Hold(const std::string& job, int64_t generation, const Request& req) {
      held_job = req.held_step() > 0 ? job : "";
      held_generation = generation;
      held_step = req.held_step();
      held_fingerprint = req.held_fingerprint();
      held_rank = req.held_world() > 0 ? req.held_rank() : -1;
      held_world = req.held_world();
      held_next_step = req.held_next_step();
    }
    // The job and generation of its last Finish report.
    std::string reported_job;
    int64_t reported_generation = 0;
  };

  // `time` (not owned) dates heartbeats, losses and waits.
  explicit Membership(const TimeSource* time) : time_(time) {}

  // The member of id `id` (lost ones too, until forgotten), or null.
  Worker* Find(const std::string& id);
  const Worker* Find(const std::string& id) const;
  // A registration's identity: its name, or its collective address.
  static std::string NameOf(const lockstep::v1::RegisterRequest& req);
  // FailedPrecondition when a live member holds the request's name and its
  // process started after the requesting one (an old process heard again
  // does not take its name back), with the coordinator's log line in *log.
  absl::Status CheckName(const lockstep::v1::RegisterRequest& req,
                         const std::string& peer, std::string* log) const;
  // The live members named `name`, whom a new registration of it replaces.
  std::vector<Worker*> LiveNamed(const std::string& name);
  // The member a registration makes, not yet added: the next id "wN" (N:
  // registration order), its heartbeat now, and what it holds in memory
  // (held_*).
  Worker NewMember(const lockstep::v1::RegisterRequest& req);
  Worker& Add(Worker w);
  // Live, idle members that `qualifies` accepts, in registration order.
  std::vector<Worker*> Idle(
      const std::function<bool(const Worker&)>& qualifies);
  // Frees the members of `ranks` that still hold `job` (they are idle).
  void Release(const std::string& job, const std::vector<std::string>& ranks);
  // How many of `ranks` are members not lost.
  int64_t Alive(const std::vector<std::string>& ranks) const;
  // Drops the members lost `listed` ago or more that `ranked` (the ranks of
  // jobs not ended) does not hold; returns their log lines.
  std::vector<std::string> ForgetLost(absl::Duration listed,
                                      const std::set<std::string>& ranked);

  // How long the member has waited in its oldest collective receive (0:
  // not waiting, or lost): its report plus the time since it came.
  double WaitSeconds(const Worker& w) const;
  // "rank 0 has waited 6.1 s for rank 1 at step 130 (gradient bucket 2)";
  // "" below `min_seconds` or when it holds no rank.
  std::string WaitText(const Worker& w, double min_seconds) const;
  // "w3 on HOST pid N".
  static std::string Describe(const Worker& w);

  // Every member by id, for the journal and the views.
  std::map<std::string, Worker>& workers() { return workers_; }
  const std::map<std::string, Worker>& workers() const { return workers_; }
  // The next registration's number (journaled).
  int64_t next_order() const { return next_order_; }
  void set_next_order(int64_t n) { next_order_ = n; }

 private:
  absl::Time Now() const { return time_->Now(); }

  const TimeSource* const time_;
  std::map<std::string, Worker> workers_;
  int64_t next_order_ = 1;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_MEMBERSHIP_H_
