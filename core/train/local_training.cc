// `lockstep train` (see local_training.h): local storage and resume around
// a TrainingSession that holds every replica of the job.
#include "core/train/local_training.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/file_util.h"
#include "base/seconds.h"
#include "base/status_macros.h"
#include "core/audit/audit_check.h"
#include "core/audit/sample_audit.h"
#include "core/checkpoint/checkpoint.h"
#include "core/json_util.h"
#include "core/progress.h"
#include "core/summary/summary_writer.h"
#include "core/train/gpu_backend.h"
#include "core/train/result_file.h"
#include "core/train/training_session.h"

namespace lockstep {
namespace {

// Local storage: STORAGE/jobs/NAME/{checkpoints,summaries,result.json}.
class LocalHost : public SessionHost {
 public:
  LocalHost(const JobSpec& spec, const TrainOptions& options)
      : spec_(spec),
        options_(options),
        job_dir_(JoinPath(JoinPath(options.storage_dir, "jobs"), spec.name)),
        checkpoint_dir_(JoinPath(job_dir_, "checkpoints")) {}

  // The folders, and earlier checkpoints moved aside for --no-resume.
  absl::Status PrepareStorage();
  const std::string& job_dir() const { return job_dir_; }
  const std::string& last_checkpoint() const { return last_checkpoint_; }
  absl::Status Flush() { return summaries_->Flush(); }

  absl::StatusOr<std::optional<LoadedCheckpoint>> StartingCheckpoint() override;
  absl::StatusOr<std::string> NcclId() override { return NewNcclId(); }
  absl::Status SaveCheckpoint(const CheckpointState& state,
                              const NamedTensors& model,
                              const OptimizerParts& optimizer,
                              bool final) override;
  bool ProgressDue(int64_t step, bool boundary) override {
    return boundary ||
           SecondsSince(last_progress_) >= options_.progress_interval_seconds;
  }
  absl::Status Progress(const ProgressInfo& info,
                        const std::string* fingerprint) override {
    Log(FormatProgress(info));
    last_progress_ = Clock::now();
    return absl::OkStatus();
  }
  absl::Status Scalars(int64_t step, const ScalarList& values) override {
    return summaries_->AddScalars(step, values);
  }
  void Event(const std::string& line) override { Log(line); }
  void Log(const std::string& line) override {
    if (options_.log) options_.log(line);
  }
  bool StopRequested() const override {
    return options_.stop_requested != nullptr &&
           options_.stop_requested->load(std::memory_order_relaxed);
  }
  // STORAGE/jobs/NAME/audit.jsonl; each run a generation of its own, from
  // the step it starts at.
  absl::Status SamplesTaken(SampleRecord& record) override {
    if (audit_ == nullptr) {
      // A run after earlier ones (--resume) is the next generation.
      const std::string path = JoinPath(job_dir_, "audit.jsonl");
      generation_ = 1;
      if (access(path.c_str(), F_OK) == 0) {
        ASSIGN_OR_RETURN(AuditReport before, CheckAudit(path));
        if (!before.generations.empty()) {
          generation_ = before.generations.back().first + 1;
        }
      }
      ASSIGN_OR_RETURN(audit_, AuditLog::Open(path, spec_));
      RETURN_IF_ERROR(
          audit_->Generation(generation_, record.step, record.world_replicas));
    }
    record.generation = generation_;
    record.rank = 0;
    return audit_->Add(record);
  }

 private:
  const JobSpec& spec_;
  const TrainOptions& options_;
  const std::string job_dir_, checkpoint_dir_;
  std::unique_ptr<CheckpointStore> checkpoints_;
  std::unique_ptr<SummaryWriter> summaries_;
  std::string last_checkpoint_;
  Clock::time_point last_progress_ = Clock::now();
  std::unique_ptr<AuditLog> audit_;
  int64_t generation_ = 0;
};

absl::Status LocalHost::PrepareStorage() {
  RETURN_IF_ERROR(AnnotateStatus(MakeDirs(checkpoint_dir_), "--storage"));
  if (!options_.resume) {
    CheckpointStore old(checkpoint_dir_, spec_.checkpoint.keep);
    if (!old.ListSteps().empty()) {
      // Keep earlier work: move it aside rather than mix two runs.
      const std::string aside = absl::StrCat(checkpoint_dir_, ".before-",
                                             absl::ToUnixSeconds(absl::Now()));
      if (std::rename(checkpoint_dir_.c_str(), aside.c_str()) != 0) {
        return absl::InternalError(
            absl::StrCat("cannot move old checkpoints to \"", aside,
                         "\": ", strerror(errno)));
      }
      Log(absl::StrCat("--no-resume: earlier checkpoints moved to ", aside));
      RETURN_IF_ERROR(MakeDirs(checkpoint_dir_));
    }
  }
  checkpoints_ =
      std::make_unique<CheckpointStore>(checkpoint_dir_, spec_.checkpoint.keep);
  ASSIGN_OR_RETURN(summaries_,
                   SummaryWriter::Open(JoinPath(job_dir_, "summaries")));
  return absl::OkStatus();
}

absl::StatusOr<std::optional<LoadedCheckpoint>>
LocalHost::StartingCheckpoint() {
  if (!options_.resume) return std::nullopt;
  std::vector<std::string> warnings;
  absl::StatusOr<LoadedCheckpoint> loaded =
      CheckpointStore(checkpoint_dir_, 0).LoadLatest(&warnings);
  for (const std::string& w : warnings) Log(absl::StrCat("warning: ", w));
  if (absl::IsNotFound(loaded.status())) return std::nullopt;
  if (!loaded.ok()) {
    return AnnotateStatus(
        loaded.status(),
        "cannot resume (use --no-resume to start over; old checkpoints are "
        "kept aside)");
  }
  last_checkpoint_ = loaded->path;
  return std::optional<LoadedCheckpoint>(*std::move(loaded));
}

absl::Status LocalHost::SaveCheckpoint(const CheckpointState& state,
                                       const NamedTensors& model,
                                       const OptimizerParts& optimizer,
                                       bool final) {
  const Clock::time_point t0 = Clock::now();
  if (optimizer.sharded) {
    return absl::InternalError(
        "one process holds every replica: its optimizer state is whole");
  }
  RETURN_IF_ERROR(checkpoints_->Commit(state, model, optimizer.Whole()));
  last_checkpoint_ =
      JoinPath(checkpoint_dir_, absl::StrFormat("step-%08d", state.step));
  Log(absl::StrFormat("checkpoint %s written in %.2fs", last_checkpoint_,
                      SecondsSince(t0)));
  return absl::OkStatus();
}

// Whether `path` is the result.json of a run that ended where `result`
// stands: the same step and the same parameters (not one an interrupted
// run left behind for other parameters).
bool ResultOfTheseParameters(const std::string& path,
                             const TrainResult& result) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return false;
  absl::StatusOr<nlohmann::json> j = ParseJson(*text, path);
  return j.ok() && j->is_object() &&
         j->value("steps", int64_t{-1}) == result.steps &&
         j->value("fingerprint", std::string()) == result.fingerprint;
}

}  // namespace

absl::StatusOr<TrainResult> RunLocalTraining(const JobSpec& spec,
                                             const TrainOptions& options) {
  const Clock::time_point wall_start = Clock::now();
  const int64_t replicas = spec.total_replicas();
  if (!options.cuda_devices.empty() &&
      static_cast<int64_t>(options.cuda_devices.size()) != replicas) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d GPUs for the job's %d replicas (cluster.replicas_per_worker x "
        "cluster.workers): give one GPU per replica",
        options.cuda_devices.size(), replicas));
  }
  LocalHost host(spec, options);
  SessionConfig config;
  config.spec = spec;
  config.job_json = JobSpecToJson(spec);
  for (int64_t r = 0; r < replicas; ++r) config.replicas.push_back(r);
  config.world_replicas = replicas;
  config.threads = options.threads;
  config.cuda_devices = options.cuda_devices;
  config.end_step = options.stop_after_steps;
  // Nothing is written before the data, the model and the checkpoint to
  // resume from are known to be good.
  ASSIGN_OR_RETURN(std::unique_ptr<TrainingSession> session,
                   TrainingSession::Create(std::move(config), &host));
  RETURN_IF_ERROR(host.PrepareStorage());
  if (!session->restored_from().empty()) {
    host.Log(absl::StrFormat("resumed from %s at step %d",
                             session->restored_from(), session->step()));
  }
  const std::string on =
      options.cuda_devices.empty()
          ? std::string("CPU")
          : absl::StrCat("cuda:", absl::StrJoin(options.cuda_devices, ",cuda:"),
                         ", gradients summed by NCCL");
  const int64_t end_step =
      options.stop_after_steps < 0
          ? session->total_steps()
          : std::min(session->total_steps(),
                     std::max(options.stop_after_steps, session->step()));
  host.Log(absl::StrFormat(
      "job %s: %d parameters, %d replicas (%s) x batch %d%s = global batch "
      "%d, %d train / %d test samples, %d steps per epoch, steps %d..%d of %d",
      spec.name, session->num_parameters(), replicas, on,
      spec.batch_size_per_replica, AccumulationNote(spec),
      session->global_batch_size(),
      session->train_data().num_samples, session->test_samples(),
      session->steps_per_epoch(), session->step(), end_step,
      session->total_steps()));

  // Stopped, or at the end step: either way the last step is checkpointed.
  RETURN_IF_ERROR(session->Run().status());
  RETURN_IF_ERROR(session->SaveCheckpoint());
  RETURN_IF_ERROR(host.Flush());
  ASSIGN_OR_RETURN(SessionResult s, session->Result());

  TrainResult result;
  result.finished = s.finished;
  result.steps = s.steps;
  result.total_steps = s.total_steps;
  result.epochs = s.epochs;
  result.resumed_from_step = s.resumed_from_step;
  result.train_loss = s.train.mean_loss();
  result.train_accuracy = s.train.accuracy();
  result.samples_per_sec = s.samples_per_sec;
  result.num_parameters = s.num_parameters;
  result.optimizer_state_bytes = s.optimizer_state_bytes;
  result.loss_scale = s.loss_scale.scale;
  result.skipped_steps = s.loss_scale.skipped_steps;
  result.fingerprint = s.fingerprint;
  result.skipped_samples = static_cast<int64_t>(s.skipped_samples.size());
  result.checkpoint_path = host.last_checkpoint();
  if (result.skipped_samples > 0) {
    host.Log(absl::StrFormat(
        "skipped %d samples that could not be read (listed above)",
        result.skipped_samples));
  }
  result.wall_seconds = SecondsSince(wall_start);
  if (!result.finished) {
    host.Log(absl::StrFormat(
        "[%s] stopped at step %d of %d; checkpoint %s; run again to resume",
        spec.name, result.steps, result.total_steps, result.checkpoint_path));
    return result;
  }
  result.test_loss = s.test.mean_loss();
  result.test_accuracy = s.test.accuracy();
  result.result_path = JoinPath(host.job_dir(), "result.json");
  if (result.steps == result.resumed_from_step &&
      ResultOfTheseParameters(result.result_path, result)) {
    // Run again after it finished: nothing trained, so the result of the
    // run that did stands (this one's train loss and speed are empty).
    host.Log(absl::StrFormat(
        "[%s] had already finished at step %d: nothing to train; %s is left "
        "as it was (--no-resume trains the job again)",
        spec.name, result.steps, result.result_path));
    return result;
  }
  RETURN_IF_ERROR(WriteResultFile(result.result_path, spec, result));
  host.Log(absl::StrFormat(
      "[%s] finished: %d steps, test accuracy %.4f, test loss %.4f, "
      "%s samples/s, %.1fs; result in %s",
      spec.name, result.steps, result.test_accuracy, result.test_loss,
      FormatThousands(result.samples_per_sec), result.wall_seconds,
      result.result_path));
  return result;
}

}  // namespace lockstep
