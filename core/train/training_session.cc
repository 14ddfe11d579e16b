// TrainingSession's setup, restore, step, evaluation and checkpoint state
// (see training_session.h); the step loop is in session_run.cc.
#include "core/train/training_session.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "core/data/data_loader.h"
#include "core/fingerprint.h"
#include "core/train/checkpoint_restore.h"
#include "core/train/gpu_backend.h"

namespace lockstep {

TrainingSession::TrainingSession(SessionConfig config, SessionHost* host)
    : config_(std::move(config)), host_(host) {}

TrainingSession::~TrainingSession() = default;

absl::StatusOr<std::unique_ptr<TrainingSession>> TrainingSession::Create(
    SessionConfig config, SessionHost* host) {
  std::unique_ptr<TrainingSession> s(
      new TrainingSession(std::move(config), host));
  ASSIGN_OR_RETURN(std::optional<LoadedCheckpoint> resume,
                   host->StartingCheckpoint());
  RETURN_IF_ERROR(s->Setup(resume));
  if (resume) RETURN_IF_ERROR(s->Restore(*resume));
  return s;
}

absl::Status TrainingSession::Setup(
    const std::optional<LoadedCheckpoint>& resume) {
  const JobSpec& spec = config_.spec;
  const bool gpus = !config_.cuda_devices.empty();
  if (config_.replicas.empty() ||
      (gpus && config_.cuda_devices.size() != config_.replicas.size())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d GPUs for %d replicas: give one GPU per replica",
                        config_.cuda_devices.size(), config_.replicas.size()));
  }
  // A checkpoint's data artifacts (a vocabulary) read the data as the run
  // that wrote them did.
  DataOptions options = DataOptionsFor(spec);
  if (resume.has_value()) {
    options.restored = resume->state.artifacts;
    options.restored_from = resume->path;
  }
  ASSIGN_OR_RETURN(JobData data, LoadJobData(spec.data, std::move(options)));
  // With GPUs the devices hold the training state (ddp_); one host replica
  // holds what checkpoints and fingerprints need.
  ASSIGN_OR_RETURN(
      replicas_,
      ReplicaSet::Create(
          spec,
          gpus ? std::vector<int64_t>{config_.replicas[0]} : config_.replicas,
          config_.threads));
  RETURN_IF_ERROR(
      CheckDataFitsModel(spec, replicas_->primary(), data.train, data.test));
  train_ = std::move(data.train);
  test_total_ = data.test.num_samples;
  // A worker evaluates its share of the test set; the shares are summed.
  test_ =
      config_.world > 1
          ? data.test.Slice(test_total_ * config_.rank / config_.world,
                            test_total_ * (config_.rank + 1) / config_.world)
          : std::move(data.test);
  // The job's global batch, whatever the world: each replica's share of a
  // step is contiguous, cut into micro-batches of batch_size_per_replica
  // (gradient_accumulation_steps of them at the job's full world; more
  // when an elastic job runs on fewer workers).
  plan_ = std::make_unique<ShardPlan>(train_.num_samples,
                                      spec.global_batch_size(),
                                      config_.world_replicas, spec.seed,
                                      spec.data.shuffle);
  micros_ = static_cast<int32_t>(
      (plan_->max_replica_share() + spec.batch_size_per_replica - 1) /
      spec.batch_size_per_replica);
  total_steps_ =
      spec.epochs > 0 ? spec.epochs * plan_->steps_per_epoch() : spec.steps;
  ASSIGN_OR_RETURN(LrSchedule schedule,
                   LrSchedule::ForJob(spec, plan_->steps_per_epoch()));
  schedule_ = std::make_unique<LrSchedule>(std::move(schedule));
  const std::string& imported = replicas_->primary().graph().import_summary();
  if (!imported.empty()) host_->Log(imported);
  const std::string init =
      replicas_->primary().graph().InitSummary(spec.model.init_safetensors);
  if (!init.empty()) host_->Log(init);
  const bool shard = spec.cluster.shard != ShardMode::kNone &&
                     config_.peers.transport != nullptr;
  if (spec.cluster.shard != ShardMode::kNone && !shard) {
    host_->Log(
        "cluster.shard: this process holds every replica of the job, so its "
        "optimizer state stays whole");
  }
  if (gpus && shard) {
    return absl::InvalidArgumentError(
        "cluster.shard: GPU replicas keep their optimizer state whole (the "
        "sharded update runs on CPU replicas); use shard \"none\" on GPUs");
  }
  if (gpus) {
    ASSIGN_OR_RETURN(optimizer_,
                     Optimizer::Create(spec.optimizer, replicas_->params()));
    if (spec.gradient_accumulation_steps > 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "gradient_accumulation_steps: GPU replicas do not accumulate "
          "micro-batches yet (got %d); run the job on CPU replicas or give "
          "each GPU the whole batch_size_per_replica",
          spec.gradient_accumulation_steps));
    }
    return SetupDevices();
  }
  if (config_.peers.transport != nullptr) {
    // Sync batch norm's sums: this process's replicas, then the workers',
    // from inside the pass (beside the gradient buckets' all-reduces: the
    // tags differ).
    replicas_->SetWorkerSum(
        [this](int64_t step, int32_t key, float* data, int64_t count) {
          return PassSum(step, key, data, count);
        });
    BucketSharding sharding;
    sharding.shard = shard;
    sharding.copies = spec.cluster.copies;
    sharding.release = shard && spec.cluster.shard == ShardMode::kGradients;
    buckets_ = std::make_unique<GradientBuckets>(
        replicas_->params(), config_.peers.bucket_bytes,
        config_.peers.transport, config_.peers.gradient_ring, sharding);
    replicas_->set_release_summed(sharding.release);
    if (sharding.release && micros_ > 1) {
      host_->Log(absl::StrFormat(
          "cluster.shard gradients: with %d micro-batches a step, each "
          "replica keeps its earlier micro-batches' gradients whole until the "
          "last one",
          micros_));
    }
  }
  std::optional<std::vector<ParamRange>> owned;
  if (shard) owned = buckets_->OwnedRanges();
  ASSIGN_OR_RETURN(optimizer_, Optimizer::Create(spec.optimizer,
                                                 replicas_->params(), owned));
  if (shard && spec.cluster.copies) {
    ASSIGN_OR_RETURN(copy_,
                     Optimizer::Create(spec.optimizer, replicas_->params(),
                                       buckets_->CopyRanges()));
  }
  return absl::OkStatus();
}

absl::Status TrainingSession::SetupDevices() {
  DeviceDataParallelConfig c;
  c.spec = config_.spec;
  c.devices = config_.cuda_devices;
  c.replica_indices = config_.replicas;
  c.world_replicas = config_.world_replicas;
  ASSIGN_OR_RETURN(c.nccl_id, host_->NcclId());
  const SessionPeers& peers = config_.peers;
  if (peers.transport != nullptr) {
    // Sync batch norm: the local GPUs meet at a host barrier, then the
    // workers' values are added over the ring.
    c.pass_sum = [this](int64_t step, int32_t key, float* data, int64_t count) {
      return PassSum(step, key, data, count);
    };
    if (!peers.nccl) {
      // NCCL sums this worker's GPUs, the gRPC ring the workers (the whole
      // flat buffer as one bucket), through pinned host memory.
      c.host_all_reduce = [this](int64_t step, float* grads, int64_t floats) {
        return AnnotateStatus(
            RingAllReduce(*config_.peers.transport,
                          CollectiveTag{config_.peers.generation, step, 0, 0},
                          grads, floats, config_.peers.gradient_ring),
            "all-reduce of the GPUs' gradients over the ring");
      };
    }
  }
  ASSIGN_OR_RETURN(ddp_, MakeDeviceDataParallel(c));
  return absl::OkStatus();
}

absl::Status TrainingSession::SumOverWorkers(int32_t bucket, int64_t step,
                                             float* values, int count,
                                             const char* what) {
  const SessionPeers& peers = config_.peers;
  if (peers.transport == nullptr) return absl::OkStatus();
  // A few values: GatherSum, half the ring's latency.
  return AnnotateStatus(
      GatherSum(*peers.transport,
                CollectiveTag{peers.generation, step, bucket, 0}, values, count,
                peers.ring),
      what);
}

absl::Status TrainingSession::PassSum(int64_t step, int32_t key, float* data,
                                      int64_t count) {
  const SessionPeers& peers = config_.peers;
  return AnnotateStatus(
      GatherSum(*peers.transport,
                CollectiveTag{peers.generation, step, kPassSumBucket + key, 0},
                data, count, peers.ring),
      "sum of sync batch norm's statistics over the workers");
}

absl::Status TrainingSession::Step(Batch& batch, const Batch* next,
                                   BatchLoss* global) {
  const JobSpec& spec = config_.spec;
  const double lr = schedule_->At(batch.global_step);
  BatchLoss local;
  applied_ = false;
  pending_.reset();
  if (ddp_ != nullptr) {
    // Gradients summed over the GPUs and the update applied on each, by
    // NCCL and the devices; the host optimizer only counts the iteration.
    ASSIGN_OR_RETURN(local, ddp_->Step(batch, next, *spec.loss, spec.seed, lr));
  } else {
    ASSIGN_OR_RETURN(local, ComputeGradients(batch));
  }
  *global = local;
  leaving_ = 0;
  regroup_ = false;
  if (config_.peers.transport != nullptr) {
    // The 4th value counts the ranks shutting down and the 5th those told
    // to regroup, so every rank learns it at the same step.
    float m[5] = {
        static_cast<float>(local.loss_sum), static_cast<float>(local.correct),
        static_cast<float>(local.count), host_->Leaving() ? 1.0f : 0.0f,
        host_->Regrouping() ? 1.0f : 0.0f};
    RETURN_IF_ERROR(SumOverWorkers(kLossBucket, batch.global_step, m, 5,
                                   "all-reduce of the step's loss"));
    global->loss_sum = m[0];
    global->correct = static_cast<int64_t>(std::llround(m[1]));
    global->count = static_cast<int64_t>(std::llround(m[2]));
    leaving_ = static_cast<int>(std::lround(m[3]));
    regroup_ = m[4] > 0.5f;
  }
  if (ddp_ != nullptr) {
    optimizer_->set_iterations(optimizer_->iterations() + 1);
    return absl::OkStatus();
  }
  if (!optimizer_->sharded()) {
    optimizer_->Apply(lr);
    UpdateMovingAverages(replicas_->params(), batch.global_count);
    return replicas_->MirrorParams();
  }
  // Sharded: this rank updates the ranges it owns (the only ones whose
  // gradients were summed here; the moving averages elsewhere come out
  // wrong and are overwritten), and the all-gather brings it the others'.
  ASSIGN_OR_RETURN(
      const double norm, optimizer_->GlobalNorm([&](float* values, int count) {
        return SumOverWorkers(kNormBucket, batch.global_step, values, count,
                              "sum of the gradient norm's parts");
      }));
  if (copy_ != nullptr) {
    // Every rank past this barrier holds what the update needs, so once
    // one rank makes it, any rank can (CopyState: a failure here leaves
    // the update pending, made on the kept copy).
    pending_ = PendingUpdate{lr, norm, batch.global_count};
    float one = 1;
    RETURN_IF_ERROR(SumOverWorkers(kUpdateBarrierBucket, batch.global_step,
                                   &one, 1, "the barrier before the update"));
  }
  Update(lr, norm, batch.global_count);
  RETURN_IF_ERROR(
      buckets_->GatherParams(config_.peers.generation, batch.global_step));
  applied_ = false;  // the step is complete: step() counts it next
  return replicas_->MirrorParams();
}

void TrainingSession::Update(double lr, double norm, int64_t global_count) {
  optimizer_->ApplyWithNorm(lr, norm);
  // The copy of the previous rank's part, from the sums it passed here,
  // with the same norm: its owner's bits.
  if (copy_ != nullptr) copy_->ApplyWithNorm(lr, norm);
  UpdateMovingAverages(replicas_->params(), global_count);
  applied_ = true;
  pending_.reset();
}

absl::StatusOr<BatchLoss> TrainingSession::ComputeGradients(Batch& batch) {
  const JobSpec& spec = config_.spec;
  const int32_t micros = micros_;
  BatchLoss local;
  // Micro-batches 0..m-2 (gradient accumulation): each replica adds up its
  // own gradients (ReplicaSet), nothing leaves yet.
  for (int32_t k = 0; k + 1 < micros; ++k) {
    Batch micro = MicroBatch(batch, k, micros, spec.batch_size_per_replica);
    ASSIGN_OR_RETURN(BatchLoss part,
                     replicas_->ComputeGradients(micro, *spec.loss, spec.seed));
    local += part;
  }
  Batch last_micro;
  if (micros > 1) {
    last_micro =
        MicroBatch(batch, micros - 1, micros, spec.batch_size_per_replica);
  }
  Batch& last = micros > 1 ? last_micro : batch;
  BatchLoss part;
  if (buckets_ != nullptr) {
    // Each bucket's all-reduce starts as soon as backward produced it.
    buckets_->BeginStep(config_.peers.generation, batch.global_step);
    ASSIGN_OR_RETURN(part, replicas_->ComputeGradients(
                               last, *spec.loss, spec.seed,
                               [this](int i) { buckets_->ParamReady(i); }));
    RETURN_IF_ERROR(buckets_->FinishStep());
  } else {
    ASSIGN_OR_RETURN(part,
                     replicas_->ComputeGradients(last, *spec.loss, spec.seed));
  }
  local += part;
  return local;
}

absl::StatusOr<BatchLoss> TrainingSession::Evaluate() {
  const Loss& loss = *config_.spec.loss;
  ASSIGN_OR_RETURN(BatchLoss local, ddp_ != nullptr
                                        ? ddp_->Evaluate(test_, loss)
                                        : replicas_->Evaluate(test_, loss));
  if (config_.peers.transport == nullptr) return local;
  float m[3] = {static_cast<float>(local.loss_sum),
                static_cast<float>(local.correct),
                static_cast<float>(local.count)};
  RETURN_IF_ERROR(
      SumOverWorkers(kEvalBucket, step_, m, 3, "all-reduce of the evaluation"));
  BatchLoss global;
  global.loss_sum = m[0];
  global.correct = static_cast<int64_t>(std::llround(m[1]));
  global.count = static_cast<int64_t>(std::llround(m[2]));
  return global;
}

absl::Status TrainingSession::Barrier(int32_t bucket) {
  float one = 1;
  return SumOverWorkers(bucket, step_, &one, 1, "the barrier");
}

absl::Status TrainingSession::SyncHostState() {
  if (ddp_ == nullptr) return absl::OkStatus();
  return ddp_->PullState(replicas_->params(), *optimizer_);
}

absl::StatusOr<std::string> TrainingSession::Fingerprint() {
  RETURN_IF_ERROR(SyncHostState());
  return lockstep::Fingerprint(replicas_->params());
}

int64_t TrainingSession::num_parameters() {
  return replicas_->primary().num_parameters();
}

void TrainingSession::Abort() {
  if (ddp_ != nullptr) ddp_->Abort();
}

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
  LossFit fit;
  fit.model_outputs = model.classes();
  fit.model_labels = model.labels_per_sample();
  fit.model_shape = ShapeToString(out);
  fit.classes = classes;
  fit.labels = lps;
  fit.source = train.source;
  if (spec.loss->check) RETURN_IF_ERROR(spec.loss->check(fit));
  const bool fits =
      model.labels_per_sample() == lps &&
      (spec.loss->fits ? spec.loss->fits(fit) : model.classes() == classes);
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
  if (test.num_samples == 0) {
    // Else every evaluation would report a loss and accuracy of 0.
    return absl::InvalidArgumentError(absl::StrCat(
        "data: the test set (", test.source,
        ") is empty: there would be nothing to evaluate"));
  }
  return absl::OkStatus();
}

}  // namespace lockstep
