// RankReports during a generation (see rank_reports.h): progress,
// fingerprints and the sample audit's records.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "coordinator/rank_reports.h"
#include "rpc/sample_wire.h"

namespace lockstep {

using lockstep::v1::JobStatus;

absl::StatusOr<lockstep::v1::ReportResponse> RankReports::ReportProgress(
    const lockstep::v1::ProgressReport& r) {
  lockstep::v1::ReportResponse resp;
  std::shared_ptr<JobReports> reports;
  {
    absl::MutexLock lock(&mu_);
    Job* job = jobs_.Find(r.job());
    if (job != nullptr && job->status.generation() != r.generation()) {
      events_.Fenced(*job, "progress", r.generation(),
                     "worker " + r.worker_id());
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
      s.set_loss_scale(r.loss_scale());
      s.set_skipped_steps(r.skipped_steps());
      for (const std::string& e : r.events()) events_.Event(*job, e);
      events_.Changed(*job);
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
    Job* job = jobs_.Find(r.job());
    if (job != nullptr) {
      events_.Event(*job,
                    absl::StrCat("warning: summaries: ", written.message()));
    }
  }
  return resp;
}

void RankReports::CompareFingerprints(Job& job, int64_t step) {
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
    events_.EndJob(
        job, lockstep::v1::FAILED,
        absl::StrFormat("parameters diverged across workers at step %d "
                        "(fingerprints %s)",
                        step, absl::StrJoin(parts, ", ")));
  }
}

absl::StatusOr<lockstep::v1::ReportResponse> RankReports::RecordSamples(
    const lockstep::v1::SampleRecord& in) {
  lockstep::v1::ReportResponse resp;
  std::shared_ptr<AuditLog> audit;
  {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(Job * job, jobs_.Get(in.job()));
    if (job->audit == nullptr) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "job %s keeps no sample audit (audit.samples is off)", job->name));
    }
    if (job->status.generation() != in.generation()) {
      events_.Fenced(*job, "samples", in.generation(),
                     "worker " + in.worker_id());
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

}  // namespace lockstep
