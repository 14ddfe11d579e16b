// The Coordinator's report side (see coordinator.h): progress and metrics,
// fingerprints, checkpoint slices, finishes, liveness, and the status views.
#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "coordinator/coordinator.h"
#include "coordinator/straggler.h"
#include "core/train/local_training.h"
#include "core/train/result_file.h"
#include "rpc/sample_wire.h"

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

absl::Status Coordinator::CheckReporter(const Job& job, int rank,
                                        const std::string& worker_id,
                                        const char* what) const {
  // A rank outside the ring would put a fingerprint no worker holds beside
  // the real ones, or count towards CompleteIfDone's "every rank finished"
  // with no rank 0 for it to read; one in another worker's name would count
  // as that rank's.
  if (rank < 0 || rank >= static_cast<int>(job.ranks.size())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s for rank %d of job %s, which has ranks 0..%d", what,
                        rank, job.name, job.ranks.size() - 1));
  }
  if (job.ranks[rank] == worker_id) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s for rank %d of job %s from worker \"%s\", but rank %d of "
      "generation %d is worker %s",
      what, rank, job.name, worker_id, rank, job.status.generation(),
      job.ranks[rank]));
}

absl::StatusOr<lockstep::v1::ReportResponse> Coordinator::ReportProgress(
    const lockstep::v1::ProgressReport& r) {
  lockstep::v1::ReportResponse resp;
  std::shared_ptr<JobReports> reports;
  {
    absl::MutexLock lock(&mu_);
    Job* job = FindJob(r.job());
    if (job != nullptr && job->status.generation() != r.generation()) {
      Fenced(*job, "progress", r.generation(), "worker " + r.worker_id());
    }
    if (job == nullptr || job->status.state() != lockstep::v1::RUNNING ||
        job->status.generation() != r.generation()) {
      resp.set_stop(true);
      resp.set_reason(job == nullptr
                          ? "no such job"
                          : absl::StrFormat("the job is %s (%s)",
                                            JobStateName(job->status.state()),
                                            job->status.message()));
      return resp;
    }
    RETURN_IF_ERROR(
        CheckReporter(*job, r.rank(), r.worker_id(), "a progress report"));
    if (r.optimizer_state_bytes() > job->status.optimizer_state_bytes()) {
      job->status.set_optimizer_state_bytes(r.optimizer_state_bytes());
    }
    if (r.rank() == 0) {
      JobStatus& s = job->status;
      s.set_step(r.step());
      s.set_epoch(r.epoch());
      if (r.total_steps() > 0) s.set_total_steps(r.total_steps());
      s.set_loss(r.loss());
      s.set_accuracy(r.accuracy());
      s.set_samples_per_sec(r.samples_per_sec());
      s.set_learning_rate(r.learning_rate());
      s.set_eta_seconds(r.eta_seconds());
      for (const std::string& e : r.events()) Event(*job, e);
      Changed(*job);
      reports = job->reports;
    }
    if (r.fingerprint_step() > 0) {
      job->fingerprints[r.fingerprint_step()][r.rank()] = r.fingerprint();
      CompareFingerprints(*job, r.fingerprint_step());
    }
  }
  if (reports == nullptr) return resp;
  // The summaries' file writes and the curves, outside the state lock.
  absl::Status written = reports->Add(r);
  if (!written.ok()) {
    absl::MutexLock lock(&mu_);
    Job* job = FindJob(r.job());
    if (job != nullptr) {
      Event(*job, absl::StrCat("warning: summaries: ", written.message()));
    }
  }
  return resp;
}

Coordinator::OpsView Coordinator::Ops() const {
  OpsView v;
  lockstep::v1::ListJobsResponse list = List();
  std::vector<std::shared_ptr<JobReports>> reports;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& s : list.jobs()) {
      auto it = jobs_.find(s.name());
      reports.push_back(it == jobs_.end() ? nullptr : it->second->reports);
    }
  }
  for (int i = 0; i < list.jobs_size(); ++i) {
    if (reports[i] == nullptr) continue;
    v.jobs.push_back(
        {list.jobs(i), reports[i]->curves(), reports[i]->checkpoints()});
  }
  v.workers.assign(list.workers().begin(), list.workers().end());
  return v;
}

void Coordinator::CompareFingerprints(Job& job, int64_t step) {
  auto it = job.fingerprints.find(step);
  if (it == job.fingerprints.end() || it->second.size() < job.ranks.size()) {
    return;
  }
  const std::string& first = it->second.begin()->second;
  std::vector<std::string> parts;
  bool same = true;
  for (const auto& [rank, fp] : it->second) {
    same = same && fp == first;
    parts.push_back(absl::StrFormat("rank %d %s", rank, fp.substr(0, 16)));
  }
  job.fingerprints.erase(job.fingerprints.begin(), std::next(it));
  if (!same) {
    EndJob(job, lockstep::v1::FAILED,
           absl::StrFormat("parameters diverged across workers at step %d "
                           "(fingerprints %s)",
                           step, absl::StrJoin(parts, ", ")));
  }
}

absl::StatusOr<lockstep::v1::ReportResponse> Coordinator::RecordSamples(
    const lockstep::v1::SampleRecord& in) {
  lockstep::v1::ReportResponse resp;
  std::shared_ptr<AuditLog> audit;
  {
    absl::MutexLock lock(&mu_);
    Job* job = FindJob(in.job());
    if (job == nullptr) {
      return absl::NotFoundError(
          absl::StrFormat("no job named \"%s\"", in.job()));
    }
    if (job->audit == nullptr) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "job %s keeps no sample audit (audit.samples is off)", job->name));
    }
    if (job->status.generation() != in.generation()) {
      Fenced(*job, "samples", in.generation(), "worker " + in.worker_id());
    }
    if (job->status.state() != lockstep::v1::RUNNING ||
        job->status.generation() != in.generation()) {
      resp.set_stop(true);
      resp.set_reason(absl::StrFormat("the job is %s at generation %d (%s)",
                                      JobStateName(job->status.state()),
                                      job->status.generation(),
                                      job->status.message()));
      return resp;
    }
    RETURN_IF_ERROR(
        CheckReporter(*job, in.rank(), in.worker_id(), "a sample record"));
    audit = job->audit;
  }
  ASSIGN_OR_RETURN(SampleRecord r, SampleRecordFromWire(in));
  // The append outside the state lock: the audit file has its own.
  RETURN_IF_ERROR(audit->Add(r));
  return resp;
}

absl::StatusOr<lockstep::v1::CheckpointAck> Coordinator::AddCheckpointSlice(
    const std::vector<lockstep::v1::CheckpointSlice>& messages) {
  if (messages.empty()) {
    return absl::InvalidArgumentError("an empty checkpoint slice stream");
  }
  const auto& head = messages.front();
  std::shared_ptr<CheckpointAssembler> assembler;
  {
    absl::MutexLock lock(&mu_);
    Job* job = FindJob(head.job());
    if (job == nullptr) {
      return absl::NotFoundError(
          absl::StrFormat("no job named \"%s\"", head.job()));
    }
    if (IsTerminal(job->status.state())) {
      return absl::CancelledError(absl::StrFormat(
          "checkpoint slice refused: job %s is %s (%s)", head.job(),
          JobStateName(job->status.state()), job->status.message()));
    }
    if (job->status.generation() != head.generation()) {
      Fenced(*job, "checkpoint_slice", head.generation(),
             absl::StrCat("rank ", head.rank()));
    }
    if (job->status.generation() != head.generation() ||
        job->status.state() != lockstep::v1::RUNNING) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "checkpoint slice for generation %d refused: job %s is %s at "
          "generation %d",
          head.generation(), head.job(), JobStateName(job->status.state()),
          job->status.generation()));
    }
    assembler = job->assembler;
  }
  // Verify and (for the last slice) commit without holding the state lock.
  absl::StatusOr<CommitInfo> info = assembler->Add(messages);
  absl::MutexLock lock(&mu_);
  Job* job = FindJob(head.job());
  if (!info.ok()) {
    if (job != nullptr) {
      job->reports->CheckpointFailed();
      Event(*job, absl::StrCat("checkpoint step ", head.step(),
                               " not committed: ", info.status().message()));
    }
    return info.status();
  }
  lockstep::v1::CheckpointAck ack;
  ack.set_committed(info->committed);
  ack.set_path(info->path);
  if (info->committed && job != nullptr) {
    job->reports->CheckpointCommitted(*info);
    job->status.set_checkpoint_path(info->path);
    Event(*job, absl::StrFormat("checkpoint %s committed (%.1f MB, %.3f s)",
                                info->path, info->bytes / 1e6, info->seconds));
  }
  return ack;
}

absl::StatusOr<LoadedCheckpoint> Coordinator::LoadCheckpoint(
    const std::string& name, int64_t step) const {
  std::shared_ptr<CheckpointStore> store;
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(name);
    if (it == jobs_.end()) {
      return absl::NotFoundError(absl::StrFormat("no job named \"%s\"", name));
    }
    store = it->second->checkpoints;
  }
  std::vector<std::string> warnings;
  ASSIGN_OR_RETURN(LoadedCheckpoint loaded, store->LoadLatest(&warnings));
  for (const std::string& w : warnings) Log("warning: " + w);
  if (loaded.state.step != step) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the latest good checkpoint of job %s is at step %d, not %d", name,
        loaded.state.step, step));
  }
  return loaded;
}

absl::Status Coordinator::Finish(const lockstep::v1::FinishRequest& req,
                                 std::string* over) {
  absl::MutexLock lock(&mu_);
  Job* job = FindJob(req.job());
  if (job != nullptr && job->status.generation() != req.generation()) {
    Fenced(*job, "finish", req.generation(), "worker " + req.worker_id());
  }
  const bool current = job != nullptr && !IsTerminal(job->status.state()) &&
                       job->status.generation() == req.generation() &&
                       job->status.state() == lockstep::v1::RUNNING;
  if (req.leaving() && !current) {
    // Leaving while idle, or after its generation ended: it only leaves
    // the membership, so that no new generation counts on it.
    auto w = workers_.find(req.worker_id());
    if (w != workers_.end() && !w->second.lost) {
      w->second.lost = true;
      w->second.lost_at = Now();
      Log(absl::StrCat("worker ", Describe(w->second), " left"));
      Persist();
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
    // survivors'), with what it kept in memory, late or not.
    auto reporter = workers_.find(req.worker_id());
    if (reporter != workers_.end() && !reporter->second.lost) {
      Worker& w = reporter->second;
      w.reported_job = job->name;
      w.reported_generation = req.generation();
      w.held_job = req.held_step() > 0 ? job->name : "";
      w.held_generation = req.generation();
      w.held_step = req.held_step();
      w.held_fingerprint = req.held_fingerprint();
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
    if (job->status.state() == lockstep::v1::RECOVERING) TryStart(*job);
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(
      CheckReporter(*job, req.rank(), req.worker_id(), "a finish report"));
  auto w = workers_.find(req.worker_id());
  const std::string who =
      w == workers_.end() ? req.worker_id() : Describe(w->second);
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
    Recover(*job, nullptr,
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
    Log(absl::StrFormat("job %s generation %d: rank %d (%s) failed: %s",
                        job->name, req.generation(), req.rank(), who,
                        req.error()));
    const auto code = static_cast<absl::StatusCode>(req.error_code());
    if (req.leaving()) {
      // A planned departure: recover without blaming the worker, which is
      // gone from the membership.
      const std::string reason = absl::StrFormat(
          "rank %d (%s) left: the worker is shutting down", req.rank(), who);
      if (w != workers_.end()) {
        w->second.lost = true;
        w->second.lost_at = Now();
        Log(absl::StrCat("worker ", who, " left"));
      }
      Recover(*job, nullptr, reason, /*planned=*/true);
      return absl::OkStatus();
    }
    if (!req.suspect_ranks().empty() &&
        RankWorker(*job, req.suspect_ranks(0)) != nullptr) {
      // A neighbour's stream broke or it went silent: the rank at the end
      // of the chain of suspects is lost.
      if (job->suspects.empty()) job->suspected_since = Now();
      // The whole report to the log; one sentence to the job's status.
      Log(
          absl::StrFormat("job %s generation %d: rank %d (%s) reports rank "
                          "%d: %s",
                          job->name, req.generation(), req.rank(), who,
                          req.suspect_ranks(0), req.error()));
      job->suspects[req.rank()] = {
          req.suspect_ranks(0),
          RingReportBrief(req.rank(), req.suspect_ranks(0), req.error())};
      BlameChain(*job, absl::Seconds(1));
      return absl::OkStatus();
    }
    if (!job->suspects.empty()) {
      // A consequence of the failure being traced (BlameChain).
      return absl::OkStatus();
    }
    switch (code) {
      case absl::StatusCode::kUnavailable:
      case absl::StatusCode::kDeadlineExceeded:
      case absl::StatusCode::kAborted:
      case absl::StatusCode::kCancelled:
      case absl::StatusCode::kResourceExhausted:
      case absl::StatusCode::kInternal:
      case absl::StatusCode::kUnknown:
        // Something about this worker or its link, not the job itself.
        Recover(*job, w == workers_.end() ? nullptr : &w->second,
                BriefReason(what));
        break;
      default:
        // The job's own fault (data, model, divergence): a restart would
        // fail the same way.
        EndJob(*job, lockstep::v1::FAILED, what);
    }
    return absl::OkStatus();
  }
  job->finished[req.rank()] = req;
  job->fingerprints[req.steps()][req.rank()] = req.fingerprint();
  CompareFingerprints(*job, req.steps());
  CompleteIfDone(*job);
  return absl::OkStatus();
}

void Coordinator::CompleteIfDone(Job& job) {
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
  result.sharded = job.spec.cluster.shard == ShardMode::kOptimizer;
  for (const auto& [rank, f] : job.finished) {
    result.optimizer_state_bytes =
        std::max(result.optimizer_state_bytes, f.optimizer_state_bytes());
  }
  if (!skipped.empty()) {
    Event(job, absl::StrFormat("%d samples could not be read and were "
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
    EndJob(job, lockstep::v1::FAILED,
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
  EndJob(job, lockstep::v1::SUCCEEDED,
         absl::StrFormat("%d steps, test accuracy %.4f, test loss %.4f, %.0f "
                         "samples/s; result in %s",
                         result.steps, result.test_accuracy, result.test_loss,
                         result.samples_per_sec, result.result_path));
}

lockstep::v1::WorkerStatus Coordinator::WorkerView(const Worker& w) const {
  lockstep::v1::WorkerStatus v;
  v.set_worker_id(w.id);
  v.set_host(w.info.host());
  v.set_pid(w.info.pid());
  v.set_address(w.info.collective_address());
  v.set_replicas(w.info.replicas());
  for (const std::string& d : w.info.devices()) v.add_devices(d);
  v.set_job(w.job);
  v.set_rank(w.rank);
  v.set_heartbeat_age_seconds(absl::ToDoubleSeconds(Now() - w.last_heartbeat));
  v.set_alive(!w.lost);
  v.set_name(w.name);
  v.set_waiting(WaitText(w, 1.0));
  if (!w.job.empty()) {
    const RankFigures f = FiguresOf(w.timing);
    v.set_ring_ms_per_mib(std::max(0.0, f.RingMsPerMib()));
    v.set_compute_ms_per_step(std::max(0.0, f.ComputeMsPerStep()));
  }
  auto it = jobs_.find(w.job);
  // A rank inside its job's rank table (a damaged journal can name a job
  // whose table is empty: no division by a zero world).
  if (!w.job.empty() && w.rank >= 0 && it != jobs_.end() &&
      w.rank < static_cast<int64_t>(it->second->ranks.size())) {
    const JobSpec& spec = it->second->spec;
    const int64_t r = spec.cluster.replicas_per_worker;
    const int64_t total = r * static_cast<int64_t>(it->second->ranks.size());
    // ShardPlan::ReplicaSlice's split of the job's global batch.
    const int64_t g = spec.global_batch_size();
    v.set_shard(absl::StrFormat(
        "replicas %d-%d of %d: samples [%d, %d) of each global batch of %d",
        w.rank * r, w.rank * r + r - 1, total, w.rank * r * g / total,
        (w.rank + 1) * r * g / total, g));
    v.set_step(it->second->status.step());
  }
  return v;
}

JobStatus Coordinator::Snapshot(const Job& job) const {
  JobStatus s = job.status;
  s.set_epochs(job.spec.epochs);
  int alive = 0;
  for (const std::string& id : job.ranks) {
    auto it = workers_.find(id);  // a finished job's may be forgotten
    if (it == workers_.end()) continue;
    const Worker& w = it->second;
    if (!w.lost) ++alive;
    // A finished job's workers may already run something else.
    if (!IsTerminal(job.status.state())) *s.add_workers() = WorkerView(w);
  }
  s.set_workers_alive(alive);
  const bool waiting = job.status.state() == lockstep::v1::PENDING ||
                       job.status.state() == lockstep::v1::RECOVERING;
  if (waiting) {
    // The last generation's speed and ETA say nothing while it waits.
    s.set_samples_per_sec(0);
    s.set_eta_seconds(-1);
    s.set_waiting_for(job.waiting_for);
    s.set_waiting_seconds_left(
        job.waiting_until == absl::InfiniteFuture()
            ? -1
            : std::max(0.0, absl::ToDoubleSeconds(job.waiting_until - Now())));
  } else {
    s.clear_recovery();
  }
  if (job.status.state() == lockstep::v1::RUNNING &&
      !job.straggler.text().empty()) {
    *s.mutable_straggler() = job.straggler;
  }
  if (job.status.state() == lockstep::v1::RUNNING) {
    for (const std::string& id : job.ranks) {
      const std::string wait =
          WaitText(workers_.at(id), options_.hang_report_seconds);
      if (!wait.empty()) {
        s.set_message(absl::StrCat("the ring is stalled: ", wait));
        break;
      }
    }
  }
  s.set_events_total(static_cast<int64_t>(job.events.size()));
  for (const std::string& e : job.events) s.add_events(e);
  return s;
}

}  // namespace lockstep
