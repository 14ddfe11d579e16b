// Membership (see membership.h).
#include "coordinator/membership.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/collective/transport.h"

namespace lockstep {

Membership::Worker* Membership::Find(const std::string& id) {
  auto it = workers_.find(id);
  return it == workers_.end() ? nullptr : &it->second;
}

const Membership::Worker* Membership::Find(const std::string& id) const {
  auto it = workers_.find(id);
  return it == workers_.end() ? nullptr : &it->second;
}

std::string Membership::NameOf(const lockstep::v1::RegisterRequest& req) {
  return req.name().empty() ? req.collective_address() : req.name();
}

absl::Status Membership::CheckName(const lockstep::v1::RegisterRequest& req,
                                   const std::string& peer,
                                   std::string* log) const {
  const std::string name = NameOf(req);
  for (const auto& [id, old] : workers_) {
    if (old.lost || old.name != name) continue;
    const bool same_process =
        old.info.pid() == req.pid() && old.info.host() == req.host();
    if (!same_process && req.started_unix_micros() > 0 &&
        old.info.started_unix_micros() > req.started_unix_micros()) {
      *log = absl::StrFormat(
          "refused worker %s pid %d (%s): \"%s\" is held by %s, a process "
          "that started later",
          req.host(), req.pid(), peer, name, Describe(old));
      return absl::FailedPreconditionError(absl::StrFormat(
          "the name \"%s\" is held by %s, which started after this process "
          "(pid %d on %s): an older process does not take a name back; two "
          "processes must not share a --name",
          name, Describe(old), req.pid(), req.host()));
    }
  }
  return absl::OkStatus();
}

std::vector<Membership::Worker*> Membership::LiveNamed(
    const std::string& name) {
  std::vector<Worker*> out;
  for (auto& [id, w] : workers_) {
    if (!w.lost && w.name == name) out.push_back(&w);
  }
  return out;
}

Membership::Worker Membership::NewMember(
    const lockstep::v1::RegisterRequest& req) {
  Worker w;
  w.info = req;
  w.name = NameOf(req);
  w.order = next_order_++;
  w.id = absl::StrFormat("w%d", w.order);
  w.last_heartbeat = Now();
  if (req.held_step() > 0) {
    // Dropped while it trained on (the coordinator was cut off from it,
    // say): what it kept may start the job's next generation.
    w.Hold(req.held_job(), req.held_generation(), req);
  }
  return w;
}

Membership::Worker& Membership::Add(Worker w) {
  Worker& slot = workers_[w.id];
  slot = std::move(w);
  return slot;
}

std::vector<Membership::Worker*> Membership::Idle(
    const std::function<bool(const Worker&)>& qualifies) {
  std::vector<Worker*> idle;
  for (auto& [id, w] : workers_) {
    if (!w.lost && w.job.empty() && qualifies(w)) idle.push_back(&w);
  }
  std::sort(idle.begin(), idle.end(), [](const Worker* a, const Worker* b) {
    return a->order < b->order;
  });
  return idle;
}

void Membership::Release(const std::string& job,
                         const std::vector<std::string>& ranks) {
  for (const std::string& id : ranks) {
    Worker* w = Find(id);
    if (w != nullptr && w->job == job) {
      w->job.clear();
      w->rank = -1;
    }
  }
}

int64_t Membership::Alive(const std::vector<std::string>& ranks) const {
  int64_t alive = 0;
  for (const std::string& id : ranks) {
    const Worker* w = Find(id);
    if (w != nullptr && !w->lost) ++alive;
  }
  return alive;
}

std::vector<std::string> Membership::ForgetLost(
    absl::Duration listed, const std::set<std::string>& ranked) {
  const absl::Time now = Now();
  std::vector<std::string> lines;
  for (auto it = workers_.begin(); it != workers_.end();) {
    const Worker& w = it->second;
    if (w.lost && w.lost_at != absl::InfiniteFuture() &&
        now - w.lost_at >= listed && ranked.count(it->first) == 0) {
      lines.push_back(absl::StrFormat("worker %s forgotten: lost %.0f s ago",
                                      Describe(w),
                                      absl::ToDoubleSeconds(now - w.lost_at)));
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  return lines;
}

double Membership::WaitSeconds(const Worker& w) const {
  if (w.wait.seconds() <= 0 || w.lost) return 0;
  // The report is as old as the heartbeat that carried it; the wait goes on.
  return w.wait.seconds() + absl::ToDoubleSeconds(Now() - w.wait_at);
}

std::string Membership::WaitText(const Worker& w, double min_seconds) const {
  const double waited = WaitSeconds(w);
  if (waited < min_seconds || w.rank < 0) return "";
  return absl::StrFormat(
      "rank %d has waited %.1f s for rank %d at step %d "
      "(%s)",
      w.rank, waited, w.wait.from_rank(), w.wait.step(),
      BucketName(w.wait.bucket()));
}

std::string Membership::Describe(const Worker& w) {
  return absl::StrFormat("%s on %s pid %d", w.id, w.info.host(), w.info.pid());
}

}  // namespace lockstep
