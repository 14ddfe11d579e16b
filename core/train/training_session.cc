// TrainingSession's setup, evaluation and figures (see
// training_session.h); the step is in session_step.cc, the step loop in
// session_run.cc, the checkpoint state in session_state.cc.
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
#include "kernels/cpu/bf16_matmul.h"

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
  // With GPUs the devices hold the training state (gpus_); one host replica
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
  if (spec.global_batch_size() > train_.num_samples) {
    host_->Log(absl::StrFormat(
        "note: the global batch (%d) is larger than the %d training "
        "samples: each epoch is one step over all of them",
        spec.global_batch_size(), train_.num_samples));
  }
  const bool shard = spec.cluster.shard != ShardMode::kNone &&
                     config_.peers.transport != nullptr;
  if (spec.cluster.shard != ShardMode::kNone && !shard) {
    host_->Log(
        "cluster.shard: this process holds every replica of the job, so its "
        "optimizer state stays whole");
  } else if (shard && config_.peers.transport->world_size() == 1) {
    host_->Log(
        "cluster.shard: one worker this generation, so it holds the whole "
        "optimizer state (the job shards it when it runs on more)");
  }
  if (gpus && shard) {
    return absl::InvalidArgumentError(
        "cluster.shard: GPU replicas keep their optimizer state whole (the "
        "sharded update runs on CPU replicas); use shard \"none\" on GPUs");
  }
  if (!gpus && spec.precision == Precision::kBf16) {
    host_->Log(absl::StrCat(
        "precision bf16: matrix products and convolutions from "
        "bfloat16-rounded inputs with float32 sums (",
        Bf16MatmulDescription(),
        "); weights, optimizer state, gradients and every other op stay "
        "float32"));
  }
  if (!gpus && spec.precision == Precision::kFp16) {
    return absl::InvalidArgumentError(
        "precision: \"fp16\" runs on GPU replicas only (its loss scaling "
        "lives in the GPUs' update); use \"bf16\" on CPU replicas, which "
        "needs no loss scaling");
  }
  if (gpus && spec.precision != Precision::kFp32) {
    const bool fp16 = spec.precision == Precision::kFp16;
    host_->Log(absl::StrCat(
        "precision ", fp16 ? "fp16" : "bf16",
        " on the GPUs: matrix products and convolutions from ",
        fp16 ? "half" : "bfloat16",
        "-rounded inputs on tensor cores with float32 sums; weights, "
        "optimizer state, gradients and every other op stay float32",
        fp16 ? absl::StrCat("; dynamic loss scaling from ",
                            LossScale::kInitialScale,
                            " (an overflowed step is skipped on every rank "
                            "and the scale halved)")
             : ""));
  }
  if (gpus) {
    ASSIGN_OR_RETURN(optimizer_,
                     Optimizer::Create(spec.optimizer, replicas_->params()));
    if (micros_ > 1 && replicas_->primary().graph().sums_across_replicas()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "gradient_accumulation_steps: GPU replicas accumulate %d "
          "micro-batches, but sync batch norm's sums inside each "
          "micro-batch's pass are not built for GPUs; run the job on CPU "
          "replicas, or without \"sync\" batch norm, or give each GPU the "
          "whole batch_size_per_replica",
          micros_));
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
  GpuReplicasConfig c;
  c.spec = config_.spec;
  c.devices = config_.cuda_devices;
  c.replica_indices = config_.replicas;
  c.world_replicas = config_.world_replicas;
  c.micros = micros_;
  // A worker's rank keeps its state for a rejoin (CopyState).
  c.keep_state = config_.peers.transport != nullptr;
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
  ASSIGN_OR_RETURN(gpus_, MakeGpuReplicas(c));
  return absl::OkStatus();
}

absl::StatusOr<BatchLoss> TrainingSession::Evaluate() {
  const Loss& loss = *config_.spec.loss;
  ASSIGN_OR_RETURN(BatchLoss local, gpus_ != nullptr
                                        ? gpus_->Evaluate(test_, loss)
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
  if (gpus_ == nullptr) return absl::OkStatus();
  return gpus_->PullState(replicas_->params(), *optimizer_);
}

absl::StatusOr<std::string> TrainingSession::Fingerprint() {
  RETURN_IF_ERROR(SyncHostState());
  return lockstep::Fingerprint(replicas_->params());
}

int64_t TrainingSession::num_parameters() {
  return replicas_->primary().num_parameters();
}

void TrainingSession::Abort() {
  if (gpus_ != nullptr) gpus_->Abort();
}

absl::Status CheckDataFitsModel(const JobSpec& spec, const Model& model,
                                const Dataset& train, const Dataset& test) {
  const int64_t want = NumElements(model.input_shape());
  // Samples of one shape: a test file of other images with as many values
  // (14 x 56 against 28 x 28) would evaluate on scrambled pixels.
  if (test.num_samples > 0 && train.sample_shape != test.sample_shape) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "data: the train samples are %s (%s) but the test samples %s (%s): "
        "they must have one shape",
        ShapeToString(train.sample_shape), train.source,
        ShapeToString(test.sample_shape), test.source));
  }
  // Images of rows x cols (IDX) against a model that takes images: the
  // same rows and cols, whatever size-1 axes either adds ([28, 28] fits
  // [28, 28, 1] and [1, 28, 28]; a flat [784] takes them flattened).
  auto squeezed = [](const Shape& s) {
    Shape out;
    for (int64_t d : s) {
      if (d != 1) out.push_back(d);
    }
    return out;
  };
  if (train.sample_shape.size() == 2 &&
      squeezed(model.input_shape()).size() == 2 &&
      squeezed(model.input_shape()) != squeezed(train.sample_shape)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model.input_shape: %s takes images of %s, but the data (%s) holds "
        "images of %s",
        ShapeToString(model.input_shape()),
        ShapeToString(squeezed(model.input_shape())), train.source,
        ShapeToString(train.sample_shape)));
  }
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
