// RankReports at the end of a generation (see rank_reports.h): each rank's
// Finish, the failure it may name, and the job's result once every rank is
// done.
#include "coordinator/rank_reports.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "core/train/local_training.h"
#include "core/train/result_file.h"

namespace lockstep {

namespace {

// A ring neighbour's report of a suspect, in one sentence: who reports
// what about whom, and at which step ("rank 0 reports: the stream from
// rank 1 broke at step 141"); the worker's whole text goes to the log.
std::string RingReportBrief(int reporter, int suspect,
                            const std::string& error) {
  std::string what;
  if (error.find("broke") != std::string::npos) {
    what = absl::StrFormat("the stream from rank %d broke", suspect);
  } else if (error.find("nothing came") != std::string::npos) {
    what = absl::StrFormat("rank %d sent nothing in time", suspect);
  } else if (error.find("is closed") != std::string::npos) {
    what = absl::StrFormat("its stream to rank %d closed", suspect);
  } else if (error.find("could not connect") != std::string::npos) {
    what = absl::StrFormat(
        "rank %d cannot be reached at its advertised address", suspect);
  } else {
    what = absl::StrFormat("rank %d failed it", suspect);
  }
  std::string step;
  if (const size_t at = error.find("step "); at != std::string::npos) {
    size_t end = at + 5;
    while (end < error.size() && absl::ascii_isdigit(error[end])) ++end;
    if (end > at + 5) step = absl::StrCat(" at ", error.substr(at, end - at));
  }
  return absl::StrFormat(
      "rank %d reports: %s%s (the coordinator's log has "
      "its words)",
      reporter, what, step);
}

}  // namespace

using lockstep::v1::JobStatus;

absl::Status RankReports::Finish(const lockstep::v1::FinishRequest& req,
                                 std::string* over) {
  absl::MutexLock lock(&mu_);
  Job* job = jobs_.Find(req.job());
  if (job != nullptr && job->status.generation() != req.generation()) {
    events_.Fenced(*job, "finish", req.generation(),
                   "worker " + req.worker_id());
  }
  const bool current = job != nullptr && !IsTerminal(job->status.state()) &&
                       job->status.generation() == req.generation() &&
                       job->status.state() == lockstep::v1::RUNNING;
  if (req.leaving() && !current) {
    // Leaving while idle, or after its generation ended: it only leaves
    // the membership, so that no new generation counts on it.
    Worker* w = members_.Find(req.worker_id());
    if (w != nullptr && !w->lost) {
      w->lost = true;
      w->lost_at = Now();
      events_.Log(absl::StrCat("worker ", Membership::Describe(*w), " left"));
      events_.Persist();
    }
    if (job != nullptr && over != nullptr) {
      *over = absl::StrFormat("job %s is %s at generation %d (%s)", job->name,
                              JobStateName(job->status.state()),
                              job->status.generation(), job->status.message());
    }
    return absl::OkStatus();
  }
  if (job == nullptr) {
    return absl::NotFoundError(
        absl::StrFormat("no job named \"%s\"", req.job()));
  }
  if (!IsTerminal(job->status.state()) &&
      job->status.generation() == req.generation()) {
    // Its report of this generation is in (the recovery waits for the
    // survivors'), with what it kept in memory, late or not; only from the
    // worker that held that rank (what another claims could start the next
    // generation from its memory).
    Worker* reporter = members_.Find(req.worker_id());
    const bool holds_rank = req.rank() >= 0 &&
                            req.rank() < static_cast<int>(job->ranks.size()) &&
                            job->ranks[req.rank()] == req.worker_id();
    if (holds_rank && reporter != nullptr && !reporter->lost) {
      Worker& w = *reporter;
      w.reported_job = job->name;
      w.reported_generation = req.generation();
      w.Hold(job->name, req.generation(), req);
    }
  }
  if (IsTerminal(job->status.state()) ||
      job->status.generation() != req.generation() ||
      job->status.state() != lockstep::v1::RUNNING) {
    // A late report of a generation that is already over.
    if (over != nullptr) {
      *over = absl::StrFormat("job %s is %s at generation %d (%s)", job->name,
                              JobStateName(job->status.state()),
                              job->status.generation(), job->status.message());
    }
    // The recovery may have been waiting for it.
    if (job->status.state() == lockstep::v1::RECOVERING) starts_.TryStart(*job);
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(
      CheckReporter(*job, req.rank(), req.worker_id(), "a finish report"));
  Worker* w = members_.Find(req.worker_id());
  const std::string who =
      w == nullptr ? req.worker_id() : Membership::Describe(*w);
  if (req.regroup()) {
    if (job->regroup_generation != req.generation()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "a regroup report from rank %d of job %s generation %d, which the "
          "coordinator did not ask to regroup",
          req.rank(), job->name, req.generation()));
    }
    // Every rank ended after the same step, keeping its state: the next
    // generation, with the workers that join, starts from it.
    job->step_at_failure = req.steps();
    failures_.Recover(
        *job, nullptr,
        absl::StrFormat("%d idle worker%s join%s, from %d to %d workers",
                        job->growing_by, job->growing_by == 1 ? "" : "s",
                        job->growing_by == 1 ? "s" : "", job->ranks.size(),
                        job->ranks.size() + job->growing_by),
        /*planned=*/false, /*regroup=*/true);
    return absl::OkStatus();
  }
  if (!req.error().empty()) {
    // The job's own error ends it with the whole text (it names the file or
    // field to fix); a recoverable one is one sentence (the log has it).
    const std::string what = absl::StrFormat("rank %d (%s) failed: %s",
                                             req.rank(), who, req.error());
    LogRecord failed(absl::StrFormat(
        "job %s generation %d: rank %d (%s) failed: %s", job->name,
        req.generation(), req.rank(), who, req.error()));
    failed.level = "warning";  // the job recovers, or fails (its own line)
    failed.job = job->name;
    failed.generation = req.generation();
    failed.rank = req.rank();
    events_.Log(failed);
    const auto code = static_cast<absl::StatusCode>(req.error_code());
    if (req.leaving()) {
      // A planned departure: recover without blaming the worker, which is
      // gone from the membership.
      const std::string reason = absl::StrFormat(
          "rank %d (%s) left: the worker is shutting down", req.rank(), who);
      if (w != nullptr) {
        w->lost = true;
        w->lost_at = Now();
        events_.Log(absl::StrCat("worker ", who, " left"));
      }
      failures_.Recover(*job, nullptr, reason, /*planned=*/true);
      return absl::OkStatus();
    }
    if (!req.suspect_ranks().empty() &&
        failures_.RankWorker(*job, req.suspect_ranks(0)) != nullptr) {
      // A neighbour's stream broke or it went silent: the rank at the end
      // of the chain of suspects is lost.
      if (job->suspects.empty()) job->suspected_since = Now();
      // The whole report to the log; one sentence to the job's status.
      events_.Log(
          absl::StrFormat("job %s generation %d: rank %d (%s) reports rank "
                          "%d: %s",
                          job->name, req.generation(), req.rank(), who,
                          req.suspect_ranks(0), req.error()));
      job->suspects[req.rank()] = {
          req.suspect_ranks(0),
          RingReportBrief(req.rank(), req.suspect_ranks(0), req.error())};
      failures_.BlameChain(*job, absl::Seconds(1));
      return absl::OkStatus();
    }
    // Something about this worker or its link, not the job itself.
    bool transient = false;
    switch (code) {
      case absl::StatusCode::kUnavailable:
      case absl::StatusCode::kDeadlineExceeded:
      case absl::StatusCode::kAborted:
      case absl::StatusCode::kCancelled:
      case absl::StatusCode::kResourceExhausted:
      case absl::StatusCode::kInternal:
      case absl::StatusCode::kUnknown:
        transient = true;
        break;
      default:
        break;
    }
    if (transient && !job->suspects.empty()) {
      // A consequence of the failure being traced (BlameChain).
      return absl::OkStatus();
    }
    if (transient) {
      failures_.Recover(*job, w, BriefReason(what));
    } else {
      // The job's own fault (data, model, divergence): a restart would
      // fail the same way, whatever failure is being traced meanwhile.
      events_.EndJob(*job, lockstep::v1::FAILED, what);
    }
    return absl::OkStatus();
  }
  job->finished[req.rank()] = req;
  job->fingerprints[req.steps()][req.rank()] = req.fingerprint();
  CompareFingerprints(*job, req.steps());
  CompleteIfDone(*job);
  // The rank's end stands across a coordinator restart (EndJob journaled
  // the job's).
  if (!IsTerminal(job->status.state())) events_.Persist();
  return absl::OkStatus();
}

void RankReports::CompleteIfDone(Job& job) {
  if (job.status.state() != lockstep::v1::RUNNING ||
      job.finished.size() < job.ranks.size()) {
    return;
  }
  const lockstep::v1::FinishRequest& chief = job.finished.at(0);
  TrainResult result;
  result.finished = true;
  result.steps = chief.steps();
  result.total_steps = std::max(job.status.total_steps(), chief.steps());
  result.epochs = chief.epochs();
  // The whole job's, whatever generations it took: the first generation's
  // start step and the time since it started.
  const auto& history = job.status.membership();
  result.resumed_from_step =
      history.empty() ? job.start_step : history.Get(0).from_step();
  result.train_loss = chief.train_loss();
  result.train_accuracy = chief.train_accuracy();
  result.test_loss = chief.test_loss();
  result.test_accuracy = chief.test_accuracy();
  result.samples_per_sec = chief.samples_per_sec();
  result.wall_seconds =
      history.empty() || history.Get(0).started_unix_seconds() <= 0
          ? absl::ToDoubleSeconds(Now() - job.started)
          : absl::ToUnixMicros(Now()) / 1e6 -
                history.Get(0).started_unix_seconds();
  result.num_parameters = chief.num_parameters();
  result.fingerprint = chief.fingerprint();
  std::set<std::string> skipped;
  for (const auto& [rank, f] : job.finished) {
    skipped.insert(f.skipped_samples().begin(), f.skipped_samples().end());
  }
  result.skipped_samples = static_cast<int64_t>(skipped.size());
  result.shard = job.spec.cluster.shard;
  result.copies = result.shard != ShardMode::kNone && job.spec.cluster.copies;
  for (const auto& [rank, f] : job.finished) {
    result.optimizer_state_bytes =
        std::max(result.optimizer_state_bytes, f.optimizer_state_bytes());
  }
  // fp16: every rank skips alike; the chief's figures.
  result.loss_scale = chief.loss_scale();
  result.skipped_steps = chief.skipped_steps();
  if (!skipped.empty()) {
    events_.Event(job, absl::StrFormat("%d samples could not be read and were "
                                       "skipped (the workers' logs name them)",
                                       result.skipped_samples));
  }
  result.checkpoint_path = job.status.checkpoint_path();
  result.fenced.insert(job.status.fenced().begin(), job.status.fenced().end());
  for (const lockstep::v1::MembershipChange& m : job.status.membership()) {
    result.membership.push_back({m.generation(), m.from_step(), m.workers(),
                                 m.replicas(), m.why(),
                                 m.started_unix_seconds()});
  }
  const std::string dir =
      JoinPath(JoinPath(options_.storage_dir, "jobs"), job.name);
  result.result_path = JoinPath(dir, "result.json");
  absl::Status s = WriteResultFile(result.result_path, job.spec, result);
  if (!s.ok()) {
    events_.EndJob(job, lockstep::v1::FAILED,
                   absl::StrCat("cannot write result.json: ", s.message()));
    return;
  }
  JobStatus& st = job.status;
  st.set_step(result.steps);
  st.set_test_loss(result.test_loss);
  st.set_test_accuracy(result.test_accuracy);
  st.set_fingerprint(result.fingerprint);
  st.set_result_path(result.result_path);
  st.set_samples_per_sec(result.samples_per_sec);
  st.set_eta_seconds(0);
  events_.EndJob(
      job, lockstep::v1::SUCCEEDED,
      absl::StrFormat("%d steps, test accuracy %.4f, test loss %.4f, %.0f "
                      "samples/s; result in %s",
                      result.steps, result.test_accuracy, result.test_loss,
                      result.samples_per_sec, result.result_path));
}

}  // namespace lockstep
