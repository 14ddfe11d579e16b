// The single-process training loop (see trainer.h). One CPU step: every
// local replica runs forward/backward on its slice of the global batch,
// gradients are summed into replica 0 in replica order (deterministic),
// replica 0's optimizer updates, and the new parameters are copied to the
// others. One GPU step: DeviceDataParallel::Step (NCCL over the local GPUs).
#include "core/train/trainer.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "core/checkpoint/checkpoint.h"
#include "core/data/batch_prefetcher.h"
#include "core/data/dataset.h"
#include "core/data/shard_plan.h"
#include "core/fingerprint.h"
#include "core/progress.h"
#include "core/summary/summary_writer.h"
#include "core/train/checkpoint_restore.h"
#include "core/train/device_data_parallel.h"
#include "core/train/gpu_backend.h"
#include "core/train/lr_schedule.h"
#include "core/train/optimizer.h"
#include "core/train/replica_set.h"
#include "core/train/result_file.h"
#include "core/train/step_meter.h"

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

absl::Status CheckDataFitsModel(const JobSpec& spec, const Model& model,
                                const Dataset& train, const Dataset& test) {
  const int64_t want = NumElements(model.input_shape());
  for (const Dataset* d : {&train, &test}) {
    const int64_t have = NumElements(d->sample_shape);
    if (have != want) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "model.input_shape: %s has %d values per sample, but the data (%s) "
          "has %d per sample (%s)",
          ShapeToString(model.input_shape()), want, d->source, have,
          ShapeToString(d->sample_shape)));
    }
  }
  const Shape& out = model.output_shape();
  const int64_t classes = train.num_classes;
  const int64_t lps = train.labels_per_sample;
  if (spec.loss == LossType::kBinaryCrossentropy) {
    // One logit (or sigmoid probability) per sample, labels 0 and 1.
    if (classes != 2 || lps != 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "loss: binary_crossentropy needs two classes (labels 0 and 1), "
          "one per sample; the data (%s) has %d label(s) of %d classes per "
          "sample",
          train.source, lps, classes));
    }
    if (model.classes() != 1 || model.labels_per_sample() != 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "model: binary_crossentropy reads one logit per sample (a last "
          "dense layer of 1 unit, linear or sigmoid), but the model outputs "
          "%s per sample",
          ShapeToString(out)));
    }
  }
  const bool fits =
      model.labels_per_sample() == lps &&
      (model.classes() == classes ||
       (spec.loss == LossType::kMse && model.classes() == 1 && lps == 1) ||
       spec.loss == LossType::kBinaryCrossentropy);
  if (!fits && lps == 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model: the model outputs %s per sample but the data has %d classes "
        "(data.num_classes); the last layer needs %d units%s",
        ShapeToString(out), classes, classes,
        out.size() > 1 ? ", after a flatten layer" : ""));
  }
  if (!fits) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model: the model outputs %s per sample but the data has %d labels "
        "of %d classes per sample (%s); the output must be [%d, %d]",
        ShapeToString(out), lps, classes, train.source, lps, classes));
  }
  if (train.num_samples == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("data: the training set (", train.source, ") is empty"));
  }
  return absl::OkStatus();
}

namespace {

class LocalTrainer {
 public:
  LocalTrainer(const JobSpec& spec, const TrainOptions& options)
      : spec_(spec), options_(options) {}

  absl::StatusOr<TrainResult> Run();

 private:
  absl::Status Setup();
  absl::Status PrepareStorage();
  // The checkpoint to resume from, if any, into resume_ (before Setup: its
  // vocabulary tokenizes the data); Restore applies it. Reads only.
  absl::Status FindCheckpoint();
  std::string CheckpointDir() const {
    return JoinPath(
        JoinPath(JoinPath(options_.storage_dir, "jobs"), spec_.name),
        "checkpoints");
  }
  absl::Status Restore();
  absl::StatusOr<BatchLoss> Step(Batch& batch, const Batch* next);
  // With GPUs: their parameters and optimizer state into the host ones.
  absl::Status SyncHostState();
  absl::Status Commit(int64_t step);
  absl::StatusOr<BatchLoss> Evaluate();
  void Log(const std::string& line) {
    if (options_.log) options_.log(line);
  }
  bool StopRequested() const {
    return options_.stop_requested != nullptr &&
           options_.stop_requested->load(std::memory_order_relaxed);
  }

  const JobSpec& spec_;
  const TrainOptions& options_;
  std::string job_json_;
  std::string job_dir_;
  Dataset train_, test_;
  std::unique_ptr<ShardPlan> plan_;
  // With GPUs ddp_ trains and replicas_ is one host replica holding what
  // checkpoints and the fingerprint need.
  std::vector<int64_t> replica_ids_;  // every replica's: the batch plan's
  std::unique_ptr<ReplicaSet> replicas_;
  std::unique_ptr<DeviceDataParallel> ddp_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<CheckpointStore> checkpoints_;
  std::unique_ptr<SummaryWriter> summaries_;
  int64_t total_steps_ = 0;
  int64_t start_step_ = 0;
  int64_t last_commit_step_ = -1;
  std::string last_checkpoint_;
  std::optional<LoadedCheckpoint> resume_;
};

absl::Status LocalTrainer::Setup() {
  job_json_ = JobSpecToJson(spec_);
  ASSIGN_OR_RETURN(JobData data,
                   resume_
                       ? LoadJobData(spec_, resume_->state.vocab, resume_->path)
                       : LoadJobData(spec_, "", ""));
  train_ = std::move(data.train);
  test_ = std::move(data.test);
  const int64_t replicas = spec_.total_replicas();
  replica_ids_.resize(replicas);
  for (int64_t r = 0; r < replicas; ++r) replica_ids_[r] = r;
  const bool gpus = !options_.cuda_devices.empty();
  if (gpus && static_cast<int64_t>(options_.cuda_devices.size()) != replicas) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d GPUs for the job's %d replicas (cluster.replicas_per_worker x "
        "cluster.workers): give one GPU per replica",
        options_.cuda_devices.size(), replicas));
  }
  ASSIGN_OR_RETURN(
      replicas_,
      ReplicaSet::Create(spec_, gpus ? std::vector<int64_t>{0} : replica_ids_,
                         options_.threads));
  RETURN_IF_ERROR(
      CheckDataFitsModel(spec_, replicas_->primary(), train_, test_));
  if (gpus) {
    // One NCCL communicator over the local GPUs, its id made here.
    DeviceDataParallelConfig c;
    c.spec = spec_;
    c.devices = options_.cuda_devices;
    c.replica_indices = replica_ids_;
    c.world_replicas = replicas;
    ASSIGN_OR_RETURN(c.nccl_id, NewNcclId());
    ASSIGN_OR_RETURN(ddp_, MakeDeviceDataParallel(c));
  }
  plan_ = std::make_unique<ShardPlan>(train_.num_samples,
                                      spec_.batch_size_per_replica, replicas,
                                      spec_.seed, spec_.data.shuffle);
  total_steps_ =
      spec_.epochs > 0 ? spec_.epochs * plan_->steps_per_epoch() : spec_.steps;
  ASSIGN_OR_RETURN(optimizer_,
                   Optimizer::Create(spec_.optimizer, replicas_->params()));
  ASSIGN_OR_RETURN(LrSchedule schedule,
                   LrSchedule::ForJob(spec_, plan_->steps_per_epoch()));
  schedule_ = std::make_unique<LrSchedule>(std::move(schedule));

  return absl::OkStatus();
}

absl::Status LocalTrainer::PrepareStorage() {
  job_dir_ = JoinPath(JoinPath(options_.storage_dir, "jobs"), spec_.name);
  const std::string ckpt_dir = CheckpointDir();
  RETURN_IF_ERROR(AnnotateStatus(MakeDirs(ckpt_dir), "--storage"));
  if (!options_.resume) {
    CheckpointStore old(ckpt_dir, spec_.checkpoint.keep);
    if (!old.ListSteps().empty()) {
      // Keep earlier work: move it aside rather than mix two runs.
      const std::string aside =
          absl::StrCat(ckpt_dir, ".before-", absl::ToUnixSeconds(absl::Now()));
      if (std::rename(ckpt_dir.c_str(), aside.c_str()) != 0) {
        return absl::InternalError(
            absl::StrCat("cannot move old checkpoints to \"", aside,
                         "\": ", strerror(errno)));
      }
      Log(absl::StrCat("--no-resume: earlier checkpoints moved to ", aside));
      RETURN_IF_ERROR(MakeDirs(ckpt_dir));
    }
  }
  checkpoints_ =
      std::make_unique<CheckpointStore>(ckpt_dir, spec_.checkpoint.keep);
  ASSIGN_OR_RETURN(summaries_,
                   SummaryWriter::Open(JoinPath(job_dir_, "summaries")));
  return absl::OkStatus();
}

absl::Status LocalTrainer::FindCheckpoint() {
  if (!options_.resume) return absl::OkStatus();
  std::vector<std::string> warnings;
  absl::StatusOr<LoadedCheckpoint> loaded =
      CheckpointStore(CheckpointDir(), 0).LoadLatest(&warnings);
  for (const std::string& w : warnings) Log(absl::StrCat("warning: ", w));
  if (absl::IsNotFound(loaded.status())) return absl::OkStatus();
  if (!loaded.ok()) {
    return AnnotateStatus(
        loaded.status(),
        "cannot resume (use --no-resume to start over; old checkpoints are "
        "kept aside)");
  }
  resume_ = *std::move(loaded);
  return absl::OkStatus();
}

absl::Status LocalTrainer::Restore() {
  if (!resume_) return absl::OkStatus();
  const LoadedCheckpoint* loaded = &*resume_;
  const std::string where = absl::StrCat("checkpoint ", loaded->path);
  if (loaded->state.job_json != job_json_) {
    Log(absl::StrCat("note: the job file changed since ", where,
                     "; resuming with the new settings"));
  }
  std::vector<std::string> fresh;
  RETURN_IF_ERROR(
      ApplyCheckpoint(*loaded, replicas_->params(), *optimizer_, &fresh));
  if (!fresh.empty()) Log(FreshStateNote(fresh));
  RETURN_IF_ERROR(ddp_ != nullptr
                      ? ddp_->PushState(replicas_->params(), *optimizer_)
                      : replicas_->MirrorParams());
  start_step_ = loaded->state.step;
  last_commit_step_ = start_step_;
  last_checkpoint_ = loaded->path;
  Log(absl::StrFormat("resumed from %s at step %d", loaded->path, start_step_));
  resume_.reset();  // its tensors are in the model now
  return absl::OkStatus();
}

absl::StatusOr<BatchLoss> LocalTrainer::Step(Batch& batch, const Batch* next) {
  const double lr = schedule_->At(batch.global_step);
  if (ddp_ != nullptr) {
    ASSIGN_OR_RETURN(BatchLoss loss,
                     ddp_->Step(batch, next, spec_.loss, spec_.seed, lr));
    // The devices updated; the host optimizer only counts the iteration.
    optimizer_->set_iterations(optimizer_->iterations() + 1);
    return loss;
  }
  ASSIGN_OR_RETURN(BatchLoss loss,
                   replicas_->ComputeGradients(batch, spec_.loss, spec_.seed));
  optimizer_->Apply(lr);
  UpdateMovingAverages(replicas_->params(), batch.global_count);
  RETURN_IF_ERROR(replicas_->MirrorParams());
  return loss;
}

absl::Status LocalTrainer::SyncHostState() {
  if (ddp_ == nullptr) return absl::OkStatus();
  return ddp_->PullState(replicas_->params(), *optimizer_);
}

absl::Status LocalTrainer::Commit(int64_t step) {
  if (step == last_commit_step_) return absl::OkStatus();
  RETURN_IF_ERROR(SyncHostState());
  const int64_t spe = plan_->steps_per_epoch();
  CheckpointState state;
  state.step = step;
  state.epoch = step / spe;
  state.step_in_epoch = step % spe;
  state.seed = spec_.seed;
  state.optimizer_iterations = optimizer_->iterations();
  state.job_json = job_json_;
  state.vocab = VocabText(train_);
  NamedTensors model, opt;
  for (Param* p : replicas_->params()) model.emplace_back(p->name, &p->value);
  for (auto& [name, t] : optimizer_->StateTensors()) opt.emplace_back(name, t);
  Clock::time_point t0 = Clock::now();
  RETURN_IF_ERROR(checkpoints_->Commit(state, model, opt));
  last_commit_step_ = step;
  last_checkpoint_ = JoinPath(JoinPath(job_dir_, "checkpoints"),
                              absl::StrFormat("step-%08d", step));
  Log(absl::StrFormat("checkpoint %s written in %.2fs", last_checkpoint_,
                      SecondsSince(t0)));
  return absl::OkStatus();
}

absl::StatusOr<BatchLoss> LocalTrainer::Evaluate() {
  return ddp_ != nullptr ? ddp_->Evaluate(test_, spec_.loss)
                         : replicas_->Evaluate(test_, spec_.loss);
}

absl::StatusOr<TrainResult> LocalTrainer::Run() {
  const Clock::time_point wall_start = Clock::now();
  RETURN_IF_ERROR(FindCheckpoint());
  RETURN_IF_ERROR(Setup());
  RETURN_IF_ERROR(PrepareStorage());
  RETURN_IF_ERROR(Restore());

  const int64_t spe = plan_->steps_per_epoch();
  TrainResult result;
  result.total_steps = total_steps_;
  result.resumed_from_step = start_step_;
  result.num_parameters = replicas_->primary().num_parameters();
  int64_t end_step = total_steps_;
  if (options_.stop_after_steps >= 0) {
    end_step =
        std::min(end_step, std::max(options_.stop_after_steps, start_step_));
  }
  const std::string on =
      ddp_ == nullptr
          ? std::string("CPU")
          : absl::StrCat(
                "cuda:", absl::StrJoin(options_.cuda_devices, ",cuda:"),
                ", gradients summed by NCCL");
  Log(absl::StrFormat(
      "job %s: %d parameters, %d replicas (%s) x batch %d = global batch %d, "
      "%d train / %d test samples, %d steps per epoch, steps %d..%d of %d",
      spec_.name, result.num_parameters, replica_ids_.size(), on,
      spec_.batch_size_per_replica, plan_->global_batch_size(),
      train_.num_samples, test_.num_samples, spe, start_step_, end_step,
      total_steps_));
  const std::string init = replicas_->primary().graph().InitSummary(
      spec_.model.init_safetensors);
  if (!init.empty()) Log(init);

  BatchPrefetcher prefetcher(&train_, plan_.get(), replica_ids_,
                             replicas_->primary().input_shape(), start_step_,
                             end_step);

  StepMeter meter;
  BatchLoss last_eval;
  bool evaluated = false;
  Clock::time_point last_progress = Clock::now();
  int64_t step = start_step_;
  const int64_t total_epochs = (total_steps_ + spe - 1) / spe;

  auto progress_line = [&](double rate) {
    ProgressInfo info;
    info.job = spec_.name;
    info.epoch = std::min(step / spe + (step % spe ? 1 : 0), total_epochs);
    if (step % spe == 0 && step > 0) info.epoch = step / spe;
    info.epochs = total_epochs;
    info.step = step;
    info.total_steps = total_steps_;
    info.loss = meter.epoch().mean_loss();
    info.accuracy = meter.epoch().accuracy();
    info.learning_rate = schedule_->At(std::max<int64_t>(step - 1, 0));
    info.samples_per_sec = rate;
    info.eta_seconds = meter.Eta(end_step - step, plan_->global_batch_size());
    return FormatProgress(info);
  };

  while (step < end_step) {
    if (StopRequested()) break;
    // Timed from the wait for data on: a slow input pipeline shows in the
    // samples/s figure instead of hiding behind the prefetch thread.
    const Clock::time_point t0 = Clock::now();
    ASSIGN_OR_RETURN(Batch batch, prefetcher.Next());
    ASSIGN_OR_RETURN(BatchLoss loss, Step(batch, prefetcher.PeekReady()));
    ++step;
    RETURN_IF_ERROR(
        meter.Add(step, SecondsSince(t0), batch.global_count, loss));

    const bool epoch_end = step % spe == 0;
    if (SecondsSince(last_progress) >= options_.progress_interval_seconds ||
        epoch_end || step == end_step) {
      Log(progress_line(meter.TakeWindowRate()));
      last_progress = Clock::now();
    }
    if (spec_.summary.every_steps > 0 &&
        step % spec_.summary.every_steps == 0) {
      const BatchLoss interval = meter.TakeSummary();
      RETURN_IF_ERROR(summaries_->AddScalars(
          step, {{"train/loss", interval.mean_loss()},
                 {"train/accuracy", interval.accuracy()},
                 {"learning_rate", schedule_->At(step - 1)},
                 {"samples_per_sec", meter.run_rate()}}));
    }
    if (epoch_end || step == total_steps_) {
      const Clock::time_point e0 = Clock::now();
      ASSIGN_OR_RETURN(last_eval, Evaluate());
      evaluated = true;
      Log(EpochDoneLine(spec_.name, (step + spe - 1) / spe, meter.epoch(),
                        last_eval, SecondsSince(e0)));
      RETURN_IF_ERROR(
          summaries_->AddScalars(step, EpochScalars(meter.epoch(), last_eval)));
      result.train_loss = meter.epoch().mean_loss();
      result.train_accuracy = meter.epoch().accuracy();
      if (epoch_end) meter.EndEpoch();
    }
    if (epoch_end || step == total_steps_ ||
        (spec_.checkpoint.every_steps > 0 &&
         step % spec_.checkpoint.every_steps == 0)) {
      RETURN_IF_ERROR(Commit(step));
    }
  }
  prefetcher.Stop();
  RETURN_IF_ERROR(Commit(step));
  RETURN_IF_ERROR(summaries_->Flush());

  if (meter.epoch().count > 0) {
    result.train_loss = meter.epoch().mean_loss();
    result.train_accuracy = meter.epoch().accuracy();
  }
  result.steps = step;
  result.epochs = step / spe;
  result.finished = step >= total_steps_;
  result.samples_per_sec = meter.run_rate();
  result.checkpoint_path = last_checkpoint_;
  RETURN_IF_ERROR(SyncHostState());
  result.fingerprint = Fingerprint(replicas_->params());
  result.skipped_samples =
      static_cast<int64_t>(SkippedSamples({&train_, &test_}).size());
  if (result.skipped_samples > 0) {
    Log(absl::StrFormat("skipped %d samples that could not be read "
                        "(listed above)",
                        result.skipped_samples));
  }
  if (result.finished) {
    if (!evaluated) {  // e.g. resumed a finished job
      ASSIGN_OR_RETURN(last_eval, Evaluate());
    }
    result.test_loss = last_eval.mean_loss();
    result.test_accuracy = last_eval.accuracy();
  }
  result.wall_seconds = SecondsSince(wall_start);
  if (result.finished) {
    result.result_path = JoinPath(job_dir_, "result.json");
    RETURN_IF_ERROR(WriteResultFile(result.result_path, spec_, result));
    Log(absl::StrFormat(
        "[%s] finished: %d steps, test accuracy %.4f, test loss %.4f, "
        "%s samples/s, %.1fs; result in %s",
        spec_.name, result.steps, result.test_accuracy, result.test_loss,
        FormatThousands(result.samples_per_sec), result.wall_seconds,
        result.result_path));
  } else {
    Log(absl::StrFormat(
        "[%s] stopped at step %d of %d; checkpoint %s; run again to resume",
        spec_.name, step, total_steps_, last_checkpoint_));
  }
  return result;
}

}  // namespace

absl::StatusOr<TrainResult> RunLocalTraining(const JobSpec& spec,
                                             const TrainOptions& options) {
  LocalTrainer trainer(spec, options);
  return trainer.Run();
}

}  // namespace lockstep
