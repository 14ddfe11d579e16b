// Failures (see failures.h).
#include "coordinator/failures.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "coordinator/straggler.h"
#include "core/collective/transport.h"

namespace lockstep {

Failures::Worker* Failures::RankWorker(const Job& job, int rank) {
  if (rank < 0 || rank >= static_cast<int>(job.ranks.size())) return nullptr;
  return members_.Find(job.ranks[rank]);
}

bool Failures::BlameChain(Job& job, absl::Duration patience) {
  if (job.suspects.empty()) return false;
  // Follow reporter -> suspect while the suspect itself reported one.
  int culprit = job.suspects.begin()->second.first;
  const std::string* why = &job.suspects.begin()->second.second;
  for (size_t hops = 0; hops < job.ranks.size(); ++hops) {
    auto next = job.suspects.find(culprit);
    if (next == job.suspects.end()) break;
    why = &next->second.second;
    culprit = next->second.first;
  }
  if (job.suspects.count(culprit)) {
    // A cycle (every rank suspects its neighbour): the first suspicion.
    culprit = job.suspects.begin()->second.first;
    why = &job.suspects.begin()->second.second;
  }
  Worker* blamed = RankWorker(job, culprit);
  if (blamed == nullptr) return false;
  const bool reported = blamed->reported_job == job.name &&
                        blamed->reported_generation == job.status.generation();
  if (job.ranks.size() > 2 && !reported && !blamed->lost &&
      Now() < job.suspected_since + patience) {
    return false;  // it may still report a suspect of its own
  }
  const std::string reason = *why;
  job.suspects.clear();
  if (blamed->lost) {
    Recover(job, blamed, reason);
  } else {
    MarkLost(*blamed, reason);
  }
  return true;
}

std::string BriefReason(const std::string& text) {
  const std::string kMore = " … (the coordinator's log has the rest)";
  // A reason made of one already cut keeps one note, at the end (it read
  // "(the coordinator's log has its … (the coordinator's log has the rest)").
  std::string t = text;
  bool cut_before = false;
  for (size_t at; (at = t.find(kMore)) != std::string::npos;) {
    t.erase(at, kMore.size());
    cut_before = true;
  }
  if (t.size() <= kBriefReasonChars) {
    return cut_before ? absl::StrCat(t, kMore) : t;
  }
  size_t cut = t.rfind(' ', kBriefReasonChars);
  if (cut == std::string::npos || cut < kBriefReasonChars / 2) {
    cut = kBriefReasonChars;
  }
  return absl::StrCat(t.substr(0, cut), kMore);
}

void Failures::MarkLost(Worker& w, const std::string& why) {
  if (w.lost) return;
  w.lost = true;
  w.lost_at = Now();
  // The whole story here; the job's status and events get one sentence.
  LogRecord lost(absl::StrFormat("worker %s (\"%s\") lost: %s",
                                 Membership::Describe(w), w.name, why));
  lost.level = "warning";
  if (!w.job.empty()) {
    lost.job = w.job;
    lost.rank = w.rank;
  }
  events_.Log(lost);
  Job* job = w.job.empty() ? nullptr : jobs_.Find(w.job);
  if (job != nullptr && job->status.state() == lockstep::v1::RUNNING) {
    // Frees every rank of the job, this one included, and journals.
    Recover(*job, &w,
            BriefReason(absl::StrFormat("rank %d (%s, %s) lost: %s", w.rank,
                                        Membership::Describe(w),
                                        w.info.collective_address(), why)));
    return;
  }
  w.job.clear();
  w.rank = -1;
  events_.Persist();
}

void Failures::Recover(Job& job, Worker* blamed, const std::string& reason,
                       bool planned, bool regroup) {
  if (job.status.state() != lockstep::v1::RUNNING) return;
  nccl_ids_.EndGeneration(job.name, job.status.generation());
  if (blamed != nullptr) ++job.failures[blamed->name];
  job.lost_reason = reason;
  // A regroup's step is the ranks' own (their Finish reports); otherwise
  // the last step reported.
  if (!regroup) job.step_at_failure = job.status.step();
  // Every rank's part of this generation is over: survivors get STOP at
  // their next heartbeat (their generation is no longer current) and are
  // idle again, first in line for the next generation.
  members_.Release(job.name, job.ranks);
  const int64_t max = job.spec.restart.max_restarts;
  job.planned_recovery = planned || regroup;
  // A planned leave checkpointed the last step: nothing to wait for.
  job.await_reports = !planned || regroup;
  job.shrink_only = false;
  job.status.set_recovery(regroup ? "grow" : planned ? "leave" : "failure");
  if (planned || regroup) {
    job.status.set_state(lockstep::v1::RECOVERING);
    job.recovering_since = Now();
    job.next_start = job.recovering_since;
    job.status.set_message(regroup ? reason
                                   : absl::StrCat(reason, "; recovering"));
    // Both stop at a step every rank completed: that step is exact.
    events_.Event(
        job, regroup
                 ? absl::StrFormat(
                       "growing: generation %d ended after step %d: %s (no "
                       "restart counted; nothing is done again)",
                       job.status.generation(), job.step_at_failure, reason)
                 : absl::StrFormat(
                       "RECOVERING from generation %d at step %d: %s; a "
                       "planned leave (no restart counted), from the latest "
                       "checkpoint once workers are there",
                       job.status.generation(), job.step_at_failure, reason));
    return;
  }
  // An elastic job whose survivors are enough goes on as a smaller world
  // (no restart is counted for a shrink); with restarts left a replacement
  // within the rejoin grace keeps the world instead.
  const int64_t survivors = members_.Alive(job.ranks);
  const bool can_shrink =
      job.spec.elastic() && survivors >= job.spec.cluster.min_workers;
  if (job.status.restarts() >= max && !can_shrink) {
    events_.EndJob(
        job, lockstep::v1::FAILED,
        absl::StrFormat("%s; no restart left (restart.max_restarts = %d)",
                        reason, max));
    return;
  }
  job.shrink_only = job.status.restarts() >= max;
  const absl::Time now = Now();
  job.status.set_state(lockstep::v1::RECOVERING);
  job.recovering_since = now;
  const double backoff =
      job.shrink_only
          ? 0.0
          : std::min(
                60.0,
                job.spec.restart.backoff_seconds *
                    std::pow(2.0, static_cast<double>(job.status.restarts())));
  job.next_start = now + absl::Seconds(backoff);
  job.status.set_message(absl::StrCat(reason, "; recovering"));
  // The step the ranks reached is known once the survivors report it: the
  // RUNNING line of the next generation says which step it starts from.
  std::string next;
  if (job.shrink_only) {
    next = absl::StrFormat(
        "no restart left (restart.max_restarts = %d): the %d surviving "
        "workers go on without a replacement (a shrink counts no restart)",
        max, survivors);
  } else if (can_shrink) {
    next = absl::StrFormat(
        "a replacement within %g s (cluster.rejoin_grace_seconds) keeps %d "
        "workers as restart %d of %d, after %.1f s back-off; else the %d "
        "survivors go on (a shrink counts no restart)",
        job.spec.cluster.rejoin_grace_seconds, job.ranks.size(),
        job.status.restarts() + 1, max, backoff, survivors);
  } else {
    next = absl::StrFormat("restart %d of %d after %.1f s back-off",
                           job.status.restarts() + 1, max, backoff);
  }
  events_.Event(
      job, absl::StrFormat("RECOVERING from generation %d: %s; %s, from "
                           "the survivors' memory or the latest checkpoint",
                           job.status.generation(), reason, next));
}

void Failures::DiagnoseHangs(Job& job) {
  for (const std::string& id : job.ranks) {
    Worker& w = *members_.Find(id);
    const std::string text = members_.WaitText(w, options_.hang_report_seconds);
    if (text.empty()) continue;
    // Follow who-waits-for-whom to the rank that waits on nothing: that
    // one holds the ring up.
    Worker* culprit = RankWorker(job, w.wait.from_rank());
    for (size_t hops = 0; culprit != nullptr && hops < job.ranks.size();
         ++hops) {
      if (members_.WaitSeconds(*culprit) < 1.0) break;
      culprit = RankWorker(job, culprit->wait.from_rank());
    }
    const std::string key = absl::StrFormat("%d/%d/%d", job.status.generation(),
                                            w.wait.step(), w.wait.bucket());
    if (w.wait_logged != key) {
      w.wait_logged = key;
      events_.Event(job, absl::StrCat("stalled: ", text));
    }
    if (culprit != nullptr && !culprit->lost &&
        members_.WaitSeconds(w) >= options_.hang_timeout_seconds) {
      MarkLost(*culprit, absl::StrFormat("hung: %s (hang timeout %.0f s)", text,
                                         options_.hang_timeout_seconds));
      return;  // the job changed state
    }
  }
}

void Failures::UpdateStraggler(Job& job) {
  std::vector<RankFigures> ranks;
  for (const std::string& id : job.ranks) {
    const Worker& w = *members_.Find(id);
    ranks.push_back(FiguresOf(
        w.timing, absl::StrFormat("%s on %s", w.name, w.info.host())));
  }
  const Straggler found = FindStraggler(ranks);
  job.straggler.Clear();
  if (found.rank < 0) return;
  job.straggler.set_rank(found.rank);
  job.straggler.set_worker_id(job.ranks[found.rank]);
  job.straggler.set_cause(found.cause);
  job.straggler.set_text(found.text);
  const std::string key = absl::StrFormat("%d/%s/%s", job.status.generation(),
                                          found.cause, found.subject);
  if (job.straggler_logged != key) {
    job.straggler_logged = key;
    events_.Event(job, absl::StrCat("straggler: ", found.text));
  }
}

void Failures::ForgetLostWorkers() {
  const std::vector<std::string> forgotten =
      members_.ForgetLost(absl::Seconds(options_.lost_workers_listed_seconds),
                          jobs_.RankedWorkers());
  for (const std::string& line : forgotten) events_.Log(line);
  if (!forgotten.empty()) events_.Persist();
}

void Failures::Check() {
  const absl::Time now = Now();
  ForgetLostWorkers();
  for (auto& [id, w] : members_.workers()) {
    if (w.lost) continue;
    const double age = absl::ToDoubleSeconds(now - w.last_heartbeat);
    if (age < options_.worker_timeout_seconds) continue;
    std::string why = absl::StrFormat("no heartbeat for %.1f s", age);
    // Say where its ring is stuck waiting for it.
    Job* job = w.job.empty() ? nullptr : jobs_.Find(w.job);
    if (job != nullptr) {
      for (const std::string& other : job->ranks) {
        // A finished job's rank may have no member left (a journal keeps
        // only live workers).
        const Worker* o = members_.Find(other);
        if (o == nullptr) continue;
        if (o != &w && o->wait.from_rank() == w.rank &&
            members_.WaitSeconds(*o) >= 1.0) {
          absl::StrAppend(&why, "; ", members_.WaitText(*o, 1.0));
          break;
        }
      }
    }
    MarkLost(w, why);
  }
  for (Job* each : jobs_.InOrder()) {
    Job& job = *each;
    if (job.status.state() == lockstep::v1::RUNNING) {
      BlameChain(job, absl::Seconds(1));
    }
    if (job.status.state() == lockstep::v1::RUNNING) DiagnoseHangs(job);
    if (job.status.state() == lockstep::v1::RUNNING) {
      UpdateStraggler(job);
    } else {
      job.straggler.Clear();
    }
    if (job.status.state() == lockstep::v1::RUNNING) starts_.MaybeGrow(job);
    if (job.status.state() == lockstep::v1::RECOVERING &&
        now - job.recovering_since >=
            absl::Seconds(job.spec.restart.replacement_timeout_seconds)) {
      events_.EndJob(
          job, lockstep::v1::FAILED,
          absl::StrFormat("%s; no replacement worker joined within %.0f s "
                          "(restart.replacement_timeout_seconds)",
                          job.lost_reason,
                          job.spec.restart.replacement_timeout_seconds));
    }
  }
  starts_.TryStartAll();
}

}  // namespace lockstep
