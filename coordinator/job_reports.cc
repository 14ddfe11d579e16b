// A job's summaries, curves and checkpoint figures (see job_reports.h).
#include "coordinator/job_reports.h"

#include <map>
#include <utility>

#include "base/status_macros.h"

namespace lockstep {
namespace {

// Keeps a curve under kMaxCurvePoints by dropping every other point of its
// older half: the recent past stays dense, the shape of the rest stays.
constexpr size_t kMaxCurvePoints = 2000;

void Append(std::vector<std::array<double, 3>>& curve,
            const std::array<double, 3>& p) {
  if (!curve.empty() && curve.back()[0] >= p[0]) {
    // A restarted generation replays steps: the curve continues from there.
    while (!curve.empty() && curve.back()[0] >= p[0]) curve.pop_back();
  }
  curve.push_back(p);
  if (curve.size() > kMaxCurvePoints) {
    std::vector<std::array<double, 3>> thin;
    const size_t half = curve.size() / 2;
    for (size_t i = 0; i < half; i += 2) thin.push_back(curve[i]);
    thin.insert(thin.end(), curve.begin() + half, curve.end());
    curve = std::move(thin);
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<JobReports>> JobReports::Open(
    const std::string& summaries_dir, bool summaries_off) {
  ASSIGN_OR_RETURN(std::unique_ptr<SummaryWriter> summaries,
                   SummaryWriter::Open(summaries_dir));
  return std::shared_ptr<JobReports>(
      new JobReports(std::move(summaries), summaries_off));
}

absl::Status JobReports::Add(const lockstep::v1::ProgressReport& r) {
  std::map<int64_t, std::vector<std::pair<std::string, double>>> by_step;
  for (const auto& sc : r.scalars()) {
    by_step[sc.step()].emplace_back(sc.tag(), sc.value());
  }
  absl::MutexLock lock(&mu_);
  bool drawn = false;
  absl::Status written;
  for (const auto& [step, values] : by_step) {
    double loss = -1, acc = -1, eval_loss = -1, eval_acc = -1;
    for (const auto& [tag, v] : values) {
      if (tag == "train/loss") loss = v;
      if (tag == "train/accuracy") acc = v;
      if (tag == "eval/loss") eval_loss = v;
      if (tag == "eval/accuracy") eval_acc = v;
    }
    if (loss >= 0) {
      Append(curves_.train, {static_cast<double>(step), loss, acc});
      drawn = true;
    }
    if (eval_loss >= 0) {
      Append(curves_.eval, {static_cast<double>(step), eval_loss, eval_acc});
    }
    absl::Status s = summaries_->AddScalars(step, values);
    if (written.ok()) written = s;
  }
  // Without summaries the reports' running means draw the curve.
  if (!drawn && summaries_off_ && r.step() > 0) {
    Append(curves_.train,
           {static_cast<double>(r.step()), r.loss(), r.accuracy()});
  }
  return written;
}

void JobReports::CheckpointCommitted(const CommitInfo& info) {
  absl::MutexLock lock(&mu_);
  ++checkpoints_.committed;
  checkpoints_.last_seconds = info.seconds;
  checkpoints_.seconds_total += info.seconds;
  checkpoints_.last_bytes = info.bytes;
  checkpoints_.bytes_total += info.bytes;
}

void JobReports::CheckpointFailed() {
  absl::MutexLock lock(&mu_);
  ++checkpoints_.failed;
}

absl::Status JobReports::Flush() {
  absl::MutexLock lock(&mu_);
  return summaries_->Flush();
}

JobReports::Curves JobReports::curves() const {
  absl::MutexLock lock(&mu_);
  return curves_;
}

JobReports::CheckpointFigures JobReports::checkpoints() const {
  absl::MutexLock lock(&mu_);
  return checkpoints_;
}

}  // namespace lockstep
