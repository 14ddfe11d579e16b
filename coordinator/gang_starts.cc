// GangStarts (see gang_starts.h): which idle members take a job's ranks, what
// each is told, why a job still waits, and a grow.
#include "coordinator/gang_starts.h"

#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace lockstep {

using lockstep::v1::JobState;
using lockstep::v1::JobStatus;

void GangStarts::TryStartAll() {
  // Recovering jobs first: their workers were taken for them.
  for (const JobState state :
       {lockstep::v1::RECOVERING, lockstep::v1::PENDING}) {
    for (Job* job : jobs_.InOrder()) {
      if (job->status.state() == state) TryStart(*job);
    }
  }
}

lockstep::v1::Assignment GangStarts::AssignmentFor(const Job& job,
                                                   int rank) const {
  lockstep::v1::Assignment a;
  a.set_job(job.name);
  a.set_job_json(job.job_json);
  a.set_generation(job.status.generation());
  a.set_rank(rank);
  a.set_world_size(static_cast<int32_t>(job.ranks.size()));
  for (const std::string& id : job.ranks) {
    a.add_peers(members_.Find(id)->info.collective_address());
  }
  a.set_replicas_per_worker(
      static_cast<int32_t>(job.spec.cluster.replicas_per_worker));
  a.set_start_step(job.start_step);
  a.set_fingerprint_every_steps(job.spec.cluster.fingerprint_every_steps);
  a.set_collective(job.collective);
  if (job.memory_step > 0) {
    a.set_memory_step(job.memory_step);
    a.set_memory_donor(job.memory_donor);
    a.set_memory_fingerprint(job.memory_fingerprint);
    for (int d : job.memory_part_donors) a.add_memory_part_donors(d);
  }
  return a;
}

namespace {
// The CUDA devices a worker registered ("cuda:0", ...) that it can
// all-reduce over with NCCL (0 when it cannot run NCCL).
int64_t Gpus(const lockstep::v1::RegisterRequest& info) {
  if (std::find(info.collectives().begin(), info.collectives().end(), "nccl") ==
      info.collectives().end()) {
    return 0;
  }
  return std::count_if(
      info.devices().begin(), info.devices().end(),
      [](const std::string& d) { return absl::StartsWith(d, "cuda:"); });
}
}  // namespace

bool GangStarts::Offers(const Job& job, const Worker& w) {
  const int64_t r = job.spec.cluster.replicas_per_worker;
  if (w.info.replicas() < r) return false;
  return job.spec.cluster.collective != Collective::kNccl || Gpus(w.info) >= r;
}

bool GangStarts::Excluded(const Job& job, const Worker& w) {
  auto it = job.failures.find(w.name);
  return it != job.failures.end() && it->second >= kFailuresBeforeExclusion;
}

std::vector<GangStarts::Worker*> GangStarts::IdleFor(const Job& job) {
  return members_.Idle(
      [&](const Worker& w) { return Offers(job, w) && !Excluded(job, w); });
}

int64_t GangStarts::WorldToStart(Job& job, int64_t available, absl::Time now) {
  const ClusterSpec& c = job.spec.cluster;
  const int64_t n = std::min(available, c.workers);
  if (n < c.min_workers) {
    job.quorum_since = absl::InfiniteFuture();
    return 0;
  }
  // No restart left: the survivors go on alone, at once (a replacement
  // would be a restart).
  if (job.shrink_only && job.status.state() == lockstep::v1::RECOVERING) {
    return std::min<int64_t>(n, static_cast<int64_t>(job.ranks.size()) - 1);
  }
  if (n == c.workers) return n;
  // An elastic job with at least its min: more may come within the grace.
  if (job.status.state() == lockstep::v1::RECOVERING) {
    // As many as before (a replacement came, or the world grows): at once.
    if (n >= static_cast<int64_t>(job.ranks.size())) return n;
    return now >= job.recovering_since + absl::Seconds(c.rejoin_grace_seconds)
               ? n
               : 0;
  }
  if (job.quorum_since == absl::InfiniteFuture()) job.quorum_since = now;
  return now >= job.quorum_since + absl::Seconds(c.start_grace_seconds) ? n : 0;
}

void GangStarts::MaybeGrow(Job& job) {
  const int64_t world = static_cast<int64_t>(job.ranks.size());
  if (!job.spec.elastic() || world >= job.spec.cluster.workers ||
      job.regroup_generation == job.status.generation() || shutting_down_) {
    return;
  }
  // Idle workers go to jobs waiting for them first.
  for (const Job* other : jobs_.InOrder()) {
    const JobState state = other->status.state();
    if (state == lockstep::v1::PENDING || state == lockstep::v1::RECOVERING) {
      return;
    }
  }
  const int64_t joining =
      std::min<int64_t>(static_cast<int64_t>(IdleFor(job).size()),
                        job.spec.cluster.workers - world);
  if (joining <= 0) return;
  job.regroup_generation = job.status.generation();
  job.growing_by = joining;
  events_.Event(
      job, absl::StrFormat(
               "%d idle worker%s can join: generation %d ends at the next "
               "step boundary to grow from %d to %d workers",
               joining, joining == 1 ? "" : "s", job.status.generation(), world,
               world + joining));
}

const GangStarts::Job* GangStarts::PendingAhead(const Job& job) const {
  for (const Job* other : jobs_.InOrder()) {
    if (other == &job) return nullptr;
    if (other->status.state() == lockstep::v1::PENDING) return other;
  }
  return nullptr;
}

std::string GangStarts::PendingReason(const Job& job) const {
  const int64_t need = job.spec.cluster.workers;
  const int64_t r = job.spec.cluster.replicas_per_worker;
  const bool nccl = job.spec.cluster.collective == Collective::kNccl;
  int idle = 0, busy = 0, small = 0, excluded = 0;
  for (const auto& [id, w] : members_.workers()) {
    if (w.lost) continue;
    if (!w.job.empty()) {
      ++busy;
    } else if (!Offers(job, w)) {
      ++small;
    } else if (Excluded(job, w)) {
      ++excluded;
    } else {
      ++idle;
    }
  }
  for (const Job* each : jobs_.InOrder()) {
    const Job& other = *each;
    if (&other != &job && other.status.state() == lockstep::v1::RECOVERING &&
        job.status.state() == lockstep::v1::PENDING) {
      return absl::StrFormat(
          "waiting: job \"%s\" is recovering and has "
          "first call on idle workers",
          other.name);
    }
  }
  if (const Job* ahead = job.status.state() == lockstep::v1::PENDING
                             ? PendingAhead(job)
                             : nullptr;
      ahead != nullptr) {
    return absl::StrFormat(
        "queued behind job \"%s\", submitted before it and still waiting "
        "for workers (jobs start in the order submitted: cancel it, or add "
        "the workers it needs)",
        ahead->name);
  }
  const ClusterSpec& c = job.spec.cluster;
  return absl::StrFormat(
      "waiting for workers: needs %s with >= %d %s each; %d idle "
      "qualify, %d busy, %d offer too few %s%s",
      job.spec.elastic()
          ? absl::StrFormat("%d (up to %d, within %g s)", c.min_workers, need,
                            job.status.state() == lockstep::v1::RECOVERING
                                ? c.rejoin_grace_seconds
                                : c.start_grace_seconds)
          : absl::StrCat(need),
      r, nccl ? "GPUs (cluster.collective \"nccl\")" : "replicas", idle, busy,
      small, nccl ? "GPUs that can run NCCL" : "replicas",
      excluded > 0 ? absl::StrFormat(", %d excluded after failing this job "
                                     "%d times",
                                     excluded, kFailuresBeforeExclusion)
                   : "");
}

bool GangStarts::TryStart(Job& job) {
  if (shutting_down_) return false;  // the next coordinator starts it
  const bool recovering = job.status.state() == lockstep::v1::RECOVERING;
  if (job.status.state() != lockstep::v1::PENDING && !recovering) return false;
  if (!recovering) {
    // Jobs start in submission order: an older pending job goes first, and
    // recovering jobs keep the workers they need. The job says which.
    // (PendingReason's precedence: a recovering job, then an older one.)
    const Job* holder = nullptr;
    for (const Job* other : jobs_.InOrder()) {
      if (other->status.state() == lockstep::v1::RECOVERING) {
        holder = other;
        break;
      }
    }
    const Job* ahead = holder == nullptr ? PendingAhead(job) : nullptr;
    if (holder != nullptr || ahead != nullptr) {
      const std::string what =
          holder != nullptr
              ? absl::StrCat("job \"", holder->name, "\" to recover")
              : absl::StrCat("job \"", ahead->name, "\" to start");
      job.waiting_until = absl::InfiniteFuture();
      const std::string reason = PendingReason(job);
      if (reason != job.status.message() || what != job.waiting_for) {
        job.status.set_message(reason);
        job.waiting_for = what;
        events_.Changed(job);
      }
      return false;
    }
  }
  std::vector<Worker*> idle = IdleFor(job);
  const absl::Time now = Now();
  // The surviving ranks say what they kept in memory in their Finish
  // reports: a start before those are in would redo steps from the
  // checkpoint.
  int awaited = 0;
  if (recovering && job.await_reports &&
      now < job.recovering_since + absl::Seconds(kSurvivorReportSeconds)) {
    for (const std::string& id : job.ranks) {
      const Worker* w = members_.Find(id);
      if (w != nullptr && !w->lost &&
          (w->reported_job != job.name ||
           w->reported_generation != job.status.generation())) {
        ++awaited;
      }
    }
  }
  const int64_t world =
      WorldToStart(job, static_cast<int64_t>(idle.size()), now);
  if (world == 0 || (recovering && (now < job.next_start || awaited > 0))) {
    // The message says why it waits and stays put while it does; what it
    // waits for and the time left are fields a watch counts down.
    std::string reason = PendingReason(job);
    std::string what = "workers";
    absl::Time until = absl::InfiniteFuture();
    const ClusterSpec& c = job.spec.cluster;
    if (recovering && now < job.next_start) {
      what = "the restart back-off";
      until = job.next_start;
    } else if (recovering && awaited > 0) {
      what =
          absl::StrFormat("%d surviving %s what %s kept in memory", awaited,
                          awaited == 1 ? "rank to report" : "ranks to report",
                          awaited == 1 ? "it" : "they");
      until = job.recovering_since + absl::Seconds(kSurvivorReportSeconds);
    } else if (recovering && job.spec.elastic() &&
               static_cast<int64_t>(idle.size()) >= c.min_workers) {
      what = absl::StrFormat(
          "a replacement worker: the rejoin grace, then %d go on",
          std::min<int64_t>(static_cast<int64_t>(idle.size()), c.workers));
      until = job.recovering_since + absl::Seconds(c.rejoin_grace_seconds);
    } else if (recovering) {
      what = "a replacement worker (restart.replacement_timeout_seconds)";
      until = job.recovering_since +
              absl::Seconds(job.spec.restart.replacement_timeout_seconds);
    } else if (job.quorum_since != absl::InfiniteFuture()) {
      what = absl::StrFormat(
          "more workers: the start grace, then %d start",
          std::min<int64_t>(static_cast<int64_t>(idle.size()), c.workers));
      until = job.quorum_since + absl::Seconds(c.start_grace_seconds);
    }
    if (recovering) {
      reason = job.status.recovery() == "grow"
                   ? job.lost_reason
                   : absl::StrCat(job.lost_reason, "; recovering: ", reason);
    }
    job.waiting_until = until;
    if (reason != job.status.message() || what != job.waiting_for) {
      job.status.set_message(reason);
      job.waiting_for = what;
      events_.Changed(job);
    }
    return false;
  }
  job.waiting_for.clear();
  job.waiting_until = absl::InfiniteFuture();
  idle.resize(world);
  const int64_t old_world = static_cast<int64_t>(job.ranks.size());
  const int64_t checkpoint_step = ChooseStart(job, idle, recovering);
  // "auto" is NCCL only when every rank can give each replica a GPU.
  bool all_gpus = true;
  for (const Worker* w : idle) {
    all_gpus =
        all_gpus && Gpus(w->info) >= job.spec.cluster.replicas_per_worker;
  }
  const Collective c = job.spec.cluster.collective;
  job.collective =
      c == Collective::kNccl || (c == Collective::kAuto && all_gpus) ? "nccl"
                                                                     : "ring";
  job.ranks.clear();
  std::vector<std::string> who;
  for (size_t r = 0; r < idle.size(); ++r) {
    idle[r]->job = job.name;
    idle[r]->rank = static_cast<int>(r);
    job.ranks.push_back(idle[r]->id);
    who.push_back(
        absl::StrFormat("rank %d = %s", r, Membership::Describe(*idle[r])));
  }
  // The generation that ends was asked to regroup (an elastic job grows):
  // its ranks all completed the step they stopped at.
  const bool grows =
      recovering && job.regroup_generation == job.status.generation();
  job.finished.clear();
  job.nccl_id.clear();
  job.fingerprints.clear();
  job.suspects.clear();
  job.quorum_since = absl::InfiniteFuture();
  job.started = now;
  job.status.set_generation(job.status.generation() + 1);
  job.status.set_state(lockstep::v1::RUNNING);
  job.status.set_step(job.start_step);
  job.status.set_message("");
  std::string restart;
  if (recovering) {
    const int64_t lost = job.step_at_failure - job.start_step;
    // From memory only the step the failure broke (never completed
    // anywhere) is done again.
    const std::string recomputed =
        job.memory_step > 0 && job.status.total_steps() > 0 &&
                job.memory_step >= job.status.total_steps()
            ? std::string("nothing is done again: the state of the last step")
        : job.memory_step > 0 ? absl::StrFormat(
                                    "only step %d, which the failure broke, is "
                                    "done again",
                                    job.memory_step + 1)
        : lost > 0 ? absl::StrFormat("steps %d..%d are recomputed",
                                     job.start_step, job.step_at_failure)
                   : std::string("no step is recomputed");
    if (grows) {
      restart = absl::StrFormat(
          " (the world grows, %.1f s later, no restart counted; no step is "
          "done again)",
          absl::ToDoubleSeconds(now - job.recovering_since));
    } else if (job.planned_recovery) {
      restart = absl::StrFormat(
          " (after a planned leave, %.1f s later, no restart counted; %s)",
          absl::ToDoubleSeconds(now - job.recovering_since), recomputed);
    } else if (job.spec.elastic() && world < old_world) {
      // The elastic contract, not a restart: the survivors go on.
      restart = absl::StrFormat(
          " (the world shrinks from %d to %d workers %.1f s after the "
          "failure, no restart counted; %s)",
          old_world, world, absl::ToDoubleSeconds(now - job.recovering_since),
          recomputed);
    } else {
      job.status.set_restarts(job.status.restarts() + 1);
      restart = absl::StrFormat(
          " (restart %d of %d, %.1f s after the failure; %s)",
          job.status.restarts(), job.spec.restart.max_restarts,
          absl::ToDoubleSeconds(now - job.recovering_since), recomputed);
    }
    job.planned_recovery = false;
    job.shrink_only = false;
  }
  // The membership history (result.json): which world runs from which
  // step, and why it changed.
  lockstep::v1::MembershipChange* m = job.status.add_membership();
  m->set_generation(job.status.generation());
  m->set_from_step(job.start_step);
  m->set_workers(static_cast<int32_t>(world));
  m->set_replicas(
      static_cast<int32_t>(world * job.spec.cluster.replicas_per_worker));
  m->set_why(!recovering ? "start" : job.lost_reason);
  m->set_started_unix_seconds(absl::ToUnixMicros(now) / 1e6);
  if (job.audit != nullptr) {
    absl::Status audited = job.audit->Generation(job.status.generation(),
                                                 job.start_step, m->replicas());
    // The training goes on; `lockstep audit` will name the generation.
    if (!audited.ok()) {
      events_.Event(
          job, absl::StrCat("warning: the sample audit: ", audited.message()));
    }
  }
  const std::string from =
      !job.memory_part_donors.empty()
          ? absl::StrFormat(
                " (the parts the ranks kept in memory, from ranks %s; the "
                "latest checkpoint is step %d)",
                absl::StrJoin(job.memory_part_donors, ", "), checkpoint_step)
      : job.memory_step > 0 ? absl::StrFormat(
                                  " (rank %d's memory; the latest checkpoint "
                                  "is step %d)",
                                  job.memory_donor, checkpoint_step)
                            : "";
  events_.Event(job,
                absl::StrFormat(
                    "RUNNING generation %d from step %d%s%s: %s%s",
                    job.status.generation(), job.start_step, from, restart,
                    absl::StrJoin(who, ", "),
                    c == Collective::kRing
                        ? ""
                        : absl::StrCat("; all-reduce over ", job.collective)));
  if (job.spec.elastic()) {
    events_.Event(
        job, absl::StrFormat(
                 "membership: %s%d workers (of %d-%d) from step %d%s%s",
                 recovering ? absl::StrFormat("%d -> ", old_world) : "", world,
                 job.spec.cluster.min_workers, job.spec.cluster.workers,
                 job.start_step, recovering ? ": " : "",
                 recovering ? job.lost_reason : ""));
  }
  return true;
}

}  // namespace lockstep
