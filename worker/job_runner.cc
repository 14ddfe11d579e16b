// The cluster worker's training loop (see job_runner.h). Per step: local
// replicas compute and sum gradients; each gradient bucket is all-reduced
// over the ring as soon as backward has produced it; a 3-value all-reduce
// carries the global loss/accuracy; every rank applies the same update.
#include "worker/job_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "core/collective/gradient_buckets.h"
#include "core/collective/ring_allreduce.h"
#include "core/data/batch_prefetcher.h"
#include "core/data/dataset.h"
#include "core/data/shard_plan.h"
#include "core/fingerprint.h"
#include "core/job/job_spec.h"
#include "core/train/checkpoint_restore.h"
#include "core/train/device_data_parallel.h"
#include "core/train/gpu_backend.h"
#include "core/train/lr_schedule.h"
#include "core/train/optimizer.h"
#include "core/train/replica_set.h"
#include "core/train/step_meter.h"
#include "core/train/trainer.h"
#include "rpc/rpc_util.h"
#include "worker/checkpoint_rpc.h"
#include "worker/nccl_bootstrap.h"

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;
using lockstep::v1::Assignment;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

class JobRunner {
 public:
  JobRunner(const Assignment& a, const RunnerContext& ctx) : a_(a), ctx_(ctx) {}
  ~JobRunner() {
    watch_done_ = true;
    if (abort_watch_.joinable()) abort_watch_.join();
    if (transport_ != nullptr) ctx_.collective->Detach(transport_.get());
  }
  absl::Status Run();
  // Tells the coordinator; returns FinishResponse.over ("" when the
  // report counted).
  std::string Finish(const absl::Status& status);
  // Calls `call` until it succeeds or fails otherwise than unreachable,
  // every second for up to 10 minutes or until the job is stopped.
  absl::Status WhileCoordinatorRestarts(
      const std::string& what, const std::function<absl::Status()>& call);

 private:
  absl::Status Setup();
  absl::Status Restore();
  // Sets *leaving to the number of ranks shutting down (agreed by all).
  // `next`: the following step's batch if ready (the NCCL path copies it to
  // the GPUs during this step), else null.
  absl::Status Step(Batch& batch, const Batch* next, BatchLoss* global,
                    int* leaving);
  // After a step in which `leaving` ranks said they shut down: a checkpoint
  // of the step (unless `saved`), a barrier so it is committed before
  // anyone reports, then the generation ends (see RunAssignment).
  absl::Status Drain(int leaving, bool saved);
  BatchLoss Evaluate(int64_t step, absl::Status* status);
  absl::Status Checkpoint(int64_t step, const BatchLoss& epoch_metrics);
  bool nccl() const { return a_.collective() == "nccl"; }
  // The NCCL path: the GPUs' parameters and optimizer state into the host
  // copies (checkpoints, fingerprints). No-op on the ring path.
  absl::Status SyncHostState();
  bool Leaving() const {
    return ctx_.leave != nullptr && ctx_.leave->load(std::memory_order_relaxed);
  }

 public:
  // This rank ended the generation because it shuts down (Finish says
  // `leaving`).
  bool drained() const { return drained_; }
  bool uses_nccl() const { return ddp_ != nullptr; }

 private:
  absl::Status Report(lockstep::v1::ProgressReport& report);
  // Every line names the job, generation, rank and step it is about.
  void Log(const std::string& line) {
    if (!ctx_.log) return;
    LogRecord r(line);
    r.job = a_.job();
    r.generation = a_.generation();
    r.rank = a_.rank();
    r.step = step_;
    ctx_.log(r);
  }
  bool Stopped() const {
    return ctx_.stop != nullptr && ctx_.stop->load(std::memory_order_relaxed);
  }
  CollectiveTag Tag(int64_t step, int32_t bucket) const {
    return CollectiveTag{a_.generation(), step, bucket, 0};
  }
  RingOptions Ring() const {
    RingOptions o;
    o.timeout = ctx_.collective_timeout;
    o.chunk_elements =
        spec_.cluster.ring_chunk_kib * 1024 / static_cast<int64_t>(sizeof(float));
    return o;
  }
  // The gradients' ring: compressed when the job says so. Loss, evaluation
  // and barrier sums stay float32.
  RingOptions GradientRing() const {
    RingOptions o = Ring();
    if (spec_.cluster.compression == Compression::kBf16) {
      o.wire = WireType::kBfloat16;
    }
    return o;
  }
  // For the start line: what cluster.compression does on this path.
  std::string WireNote() const {
    if (spec_.cluster.compression == Compression::kNone) return "";
    return nccl() ? " (in float32: cluster.compression applies to the gRPC "
                    "ring only)"
                  : ", as bfloat16 on the wire (cluster.compression)";
  }

  const Assignment& a_;
  const RunnerContext& ctx_;
  JobSpec spec_;
  Dataset train_, test_shard_;
  int64_t test_total_ = 0;
  std::unique_ptr<ShardPlan> plan_;
  std::vector<int64_t> replica_ids_;  // this worker's replicas, all of them
  std::unique_ptr<ReplicaSet> replicas_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<LrSchedule> schedule_;
  std::shared_ptr<GrpcRingTransport> transport_;
  std::unique_ptr<GradientBuckets> buckets_;  // the ring path
  std::unique_ptr<DeviceDataParallel> ddp_;   // the NCCL path
  std::thread abort_watch_;                   // aborts ddp_ on STOP
  std::atomic<bool> watch_done_{false};
  int64_t total_steps_ = 0;
  int64_t step_ = 0;
  // Final figures for Finish.
  BatchLoss last_epoch_, last_eval_;
  bool evaluated_ = false;
  StepMeter meter_;  // this run's rates and running losses
  bool coordinator_down_ = false;
  bool drained_ = false;
  // The checkpoint a rejoining run starts from, between Setup and Restore.
  std::optional<LoadedCheckpoint> resume_;
};

absl::Status JobRunner::Setup() {
  const int64_t r = a_.replicas_per_worker();
  const bool gpus = !ctx_.cuda_devices.empty();
  if ((nccl() || gpus) && static_cast<int64_t>(ctx_.cuda_devices.size()) != r) {
    // The coordinator only picks NCCL for workers that offer a GPU per
    // replica and can run it; a GPU worker registers one replica per GPU.
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s needs one GPU per replica: the job has %d replicas per worker, "
        "this worker runs %d GPU replicas",
        nccl() ? "the NCCL all-reduce" : "a GPU worker", r,
        ctx_.cuda_devices.size()));
  }
  ASSIGN_OR_RETURN(spec_, ParseJobSpec(a_.job_json()));
  if (a_.start_step() > 0) {
    // Fetched before the data: a text job tokenizes with the vocabulary
    // the checkpoint records. Restore applies the tensors.
    ASSIGN_OR_RETURN(
        resume_, FetchCheckpoint(ctx_.coordinator, a_.job(), a_.start_step()));
  }
  ASSIGN_OR_RETURN(JobData data,
                   resume_
                       ? LoadJobData(spec_, resume_->state.vocab, resume_->path)
                       : LoadJobData(spec_, "", ""));
  train_ = std::move(data.train);
  Dataset test = std::move(data.test);
  const int world = a_.world_size();
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < r; ++i) ids.push_back(a_.rank() * r + i);
  // With GPUs the devices hold the training state (ddp_); one host replica
  // holds what checkpoints and fingerprints need.
  replica_ids_ = ids;
  ASSIGN_OR_RETURN(
      replicas_,
      ReplicaSet::Create(spec_, gpus ? std::vector<int64_t>{ids[0]} : ids,
                         ctx_.threads));
  RETURN_IF_ERROR(
      CheckDataFitsModel(spec_, replicas_->primary(), train_, test));
  test_total_ = test.num_samples;
  test_shard_ = test.Slice(test.num_samples * a_.rank() / world,
                           test.num_samples * (a_.rank() + 1) / world);
  plan_ = std::make_unique<ShardPlan>(train_.num_samples,
                                      spec_.batch_size_per_replica, world * r,
                                      spec_.seed, spec_.data.shuffle);
  total_steps_ =
      spec_.epochs > 0 ? spec_.epochs * plan_->steps_per_epoch() : spec_.steps;
  ASSIGN_OR_RETURN(optimizer_,
                   Optimizer::Create(spec_.optimizer, replicas_->params()));
  const std::string init = replicas_->primary().graph().InitSummary(
      spec_.model.init_safetensors);
  if (!init.empty()) Log(init);
  ASSIGN_OR_RETURN(LrSchedule schedule,
                   LrSchedule::ForJob(spec_, plan_->steps_per_epoch()));
  schedule_ = std::make_unique<LrSchedule>(std::move(schedule));

  GrpcRingOptions ring;
  ring.job = a_.job();
  ring.generation = a_.generation();
  ring.rank = a_.rank();
  ring.peers.assign(a_.peers().begin(), a_.peers().end());
  ring.lanes = spec_.cluster.ring_streams > 0
                   ? static_cast<int>(spec_.cluster.ring_streams)
                   : ctx_.lanes;
  ring.tls = ctx_.tls;
  transport_ = std::make_shared<GrpcRingTransport>(ring);
  ctx_.collective->Attach(transport_);
  // Sync batch norm's sums: this worker's replicas (CPU or GPU), then the
  // workers', from inside the pass (concurrently with the gradient
  // buckets' all-reduces: the tags differ). A few values each, whose
  // latency stalls the step: GatherSum's world-1 messages, not the ring's
  // 2(world-1).
  auto pass_sum = [this](int64_t step, int32_t key, float* data,
                         int64_t count) {
    return AnnotateStatus(
        GatherSum(*transport_, Tag(step, kPassSumBucket + key), data, count,
                  Ring()),
        "sum of sync batch norm's statistics over the workers");
  };
  if (!gpus) {
    replicas_->SetWorkerSum(pass_sum);
    buckets_ = std::make_unique<GradientBuckets>(
        replicas_->params(), spec_.cluster.bucket_kib * 1024, transport_.get(),
        GradientRing());
    return absl::OkStatus();
  }
  DeviceDataParallelConfig c;
  c.spec = spec_;
  c.devices = ctx_.cuda_devices;
  c.replica_indices = ids;
  c.world_replicas = world * r;
  c.pass_sum = pass_sum;
  if (nccl()) {
    // Rank 0 makes the generation's ncclUniqueId; the coordinator relays it.
    ASSIGN_OR_RETURN(c.nccl_id,
                     BootstrapNcclId(ctx_.coordinator, ctx_.worker_id, a_.job(),
                                     a_.generation(), a_.rank(), &NewNcclId,
                                     absl::Seconds(120)));
  } else {
    // The ring: NCCL sums this worker's GPUs, the gRPC ring the workers
    // (the whole flat buffer as one bucket), through pinned host memory.
    ASSIGN_OR_RETURN(c.nccl_id, NewNcclId());
    c.host_all_reduce = [this](int64_t step, float* grads, int64_t floats) {
      return AnnotateStatus(
          RingAllReduce(*transport_, Tag(step, 0), grads, floats,
                        GradientRing()),
          "all-reduce of the GPUs' gradients over the ring");
    };
  }
  ASSIGN_OR_RETURN(ddp_, MakeDeviceDataParallel(c));
  // A STOP must reach a collective blocked inside NCCL too.
  abort_watch_ = std::thread([this] {
    while (!watch_done_.load()) {
      if (Stopped()) {
        ddp_->Abort();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  Log(absl::StrFormat(
      "NCCL communicator of %d GPUs ready on cuda:%s%s", nccl() ? world * r : r,
      absl::StrJoin(ctx_.cuda_devices, ",cuda:"),
      nccl() ? "" : "; the workers' sum goes over the gRPC ring"));
  return absl::OkStatus();
}

absl::Status JobRunner::SyncHostState() {
  if (ddp_ == nullptr) return absl::OkStatus();
  return ddp_->PullState(replicas_->params(), *optimizer_);
}

absl::Status JobRunner::Restore() {
  step_ = a_.start_step();
  if (!resume_) return absl::OkStatus();
  const LoadedCheckpoint loaded = *std::move(resume_);
  resume_.reset();
  std::vector<std::string> fresh;
  RETURN_IF_ERROR(
      ApplyCheckpoint(loaded, replicas_->params(), *optimizer_, &fresh));
  if (!fresh.empty()) Log(FreshStateNote(fresh));
  RETURN_IF_ERROR(ddp_ != nullptr
                      ? ddp_->PushState(replicas_->params(), *optimizer_)
                      : replicas_->MirrorParams());
  Log(absl::StrFormat("restored %s: resuming at step %d", loaded.path, step_));
  return absl::OkStatus();
}

absl::Status JobRunner::Step(Batch& batch, const Batch* next, BatchLoss* global,
                             int* leaving) {
  BatchLoss local;
  if (ddp_ != nullptr) {
    // Gradients summed over every GPU and the update applied on each, by
    // NCCL and the devices; the host optimizer only counts the iteration.
    ASSIGN_OR_RETURN(local, ddp_->Step(batch, next, spec_.loss, spec_.seed,
                                       schedule_->At(batch.global_step)));
  } else {
    buckets_->BeginStep(a_.generation(), batch.global_step);
    ASSIGN_OR_RETURN(local, replicas_->ComputeGradients(
                                batch, spec_.loss, spec_.seed,
                                [this](int i) { buckets_->ParamReady(i); }));
    RETURN_IF_ERROR(buckets_->FinishStep());
  }
  // The 4th value counts the ranks shutting down, so every rank learns it
  // at the same step. A few values: GatherSum (half the ring's latency).
  float m[4] = {static_cast<float>(local.loss_sum),
                static_cast<float>(local.correct),
                static_cast<float>(local.count), Leaving() ? 1.0f : 0.0f};
  RETURN_IF_ERROR(AnnotateStatus(
      GatherSum(*transport_, Tag(batch.global_step, kLossBucket), m, 4,
                Ring()),
      "all-reduce of the step's loss"));
  global->loss_sum = m[0];
  global->correct = static_cast<int64_t>(std::llround(m[1]));
  global->count = static_cast<int64_t>(std::llround(m[2]));
  *leaving = static_cast<int>(std::lround(m[3]));
  if (ddp_ != nullptr) {
    optimizer_->set_iterations(optimizer_->iterations() + 1);
    return absl::OkStatus();
  }
  optimizer_->Apply(schedule_->At(batch.global_step));
  UpdateMovingAverages(replicas_->params(), batch.global_count);
  return replicas_->MirrorParams();
}

BatchLoss JobRunner::Evaluate(int64_t step, absl::Status* status) {
  absl::StatusOr<BatchLoss> evaluated =
      ddp_ != nullptr ? ddp_->Evaluate(test_shard_, spec_.loss)
                      : replicas_->Evaluate(test_shard_, spec_.loss);
  if (!evaluated.ok()) {
    *status = evaluated.status();
    return BatchLoss();
  }
  const BatchLoss local = *evaluated;
  float m[3] = {static_cast<float>(local.loss_sum),
                static_cast<float>(local.correct),
                static_cast<float>(local.count)};
  *status = AnnotateStatus(
      GatherSum(*transport_, Tag(step, kEvalBucket), m, 3, Ring()),
      "all-reduce of the evaluation");
  BatchLoss global;
  global.loss_sum = m[0];
  global.correct = static_cast<int64_t>(std::llround(m[1]));
  global.count = static_cast<int64_t>(std::llround(m[2]));
  return global;
}

absl::Status JobRunner::Checkpoint(int64_t step, const BatchLoss& metrics) {
  RETURN_IF_ERROR(SyncHostState());
  const int64_t spe = plan_->steps_per_epoch();
  CheckpointState state;
  state.step = step;
  state.epoch = step / spe;
  state.step_in_epoch = step % spe;
  state.seed = spec_.seed;
  state.generation = a_.generation();
  state.optimizer_iterations = optimizer_->iterations();
  state.job_json = a_.job_json();
  if (a_.rank() == 0) state.vocab = VocabText(train_);  // only rank 0 sends it
  state.train_loss = metrics.mean_loss();
  NamedTensors model, opt;
  for (Param* p : replicas_->params()) model.emplace_back(p->name, &p->value);
  for (auto& [name, t] : optimizer_->StateTensors()) opt.emplace_back(name, t);
  SliceInfo info{a_.job(), a_.generation(), a_.rank(), a_.world_size()};
  const Clock::time_point t0 = Clock::now();
  absl::Status s =
      UploadCheckpointSlice(ctx_.coordinator, info, state, model, opt);
  if (ctx_.metrics != nullptr) {
    ctx_.metrics->AddCheckpointUpload(SecondsSince(t0), s.ok());
  }
  return s;
}

absl::Status JobRunner::Drain(int leaving, bool saved) {
  Log(absl::StrFormat(
      "%s shutting down: the generation ends after this step%s",
      Leaving() ? "this worker is"
                : absl::StrFormat("%d worker%s", leaving,
                                  leaving == 1 ? " is" : "s are"),
      saved ? " (its checkpoint is saved)" : ", with a checkpoint of it"));
  if (a_.rank() == 0) {
    lockstep::v1::ProgressReport r;
    r.set_step(step_);
    r.set_total_steps(total_steps_);
    r.set_loss(meter_.epoch().mean_loss());
    r.set_accuracy(meter_.epoch().accuracy());
    r.set_samples_per_sec(meter_.run_rate());
    r.set_eta_seconds(-1);
    r.add_events(absl::StrFormat(
        "%d worker%s shutting down: generation %d ends after step %d with a "
        "checkpoint of it",
        leaving, leaving == 1 ? " is" : "s are", a_.generation(), step_));
    Report(r).IgnoreError();  // a report that cannot be sent costs nothing
  }
  if (!saved) {
    absl::Status cs = Checkpoint(step_, meter_.epoch());
    if (absl::IsCancelled(cs) || absl::IsFailedPrecondition(cs) ||
        absl::IsNotFound(cs)) {
      return cs;
    }
    if (!cs.ok()) {
      Log(absl::StrFormat("warning: checkpoint at step %d not saved: %s", step_,
                          cs.message()));
    }
  }
  // Every rank has uploaded its slice once this returns, so the checkpoint
  // is committed before the leaving rank's Finish ends the generation.
  float one = 1;
  RETURN_IF_ERROR(AnnotateStatus(
      GatherSum(*transport_, Tag(step_, kDrainBucket), &one, 1, Ring()),
      "the drain barrier"));
  if (Leaving()) {
    drained_ = true;
    return absl::CancelledError(absl::StrFormat(
        "the worker is shutting down: left after step %d", step_));
  }
  // The leaving rank's Finish ends the generation; the STOP follows at the
  // next heartbeat.
  const Clock::time_point give_up = Clock::now() + std::chrono::minutes(1);
  while (!Stopped() && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (Stopped()) return absl::CancelledError("stopped by the coordinator");
  return absl::UnavailableError(absl::StrFormat(
      "%d worker(s) shut down after step %d, but the coordinator did not end "
      "the generation within a minute",
      leaving, step_));
}

absl::Status JobRunner::Report(lockstep::v1::ProgressReport& report) {
  report.set_worker_id(ctx_.worker_id);
  report.set_job(a_.job());
  report.set_generation(a_.generation());
  report.set_rank(a_.rank());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(30));
  lockstep::v1::ReportResponse response;
  RETURN_IF_ERROR(
      FromGrpc(ctx_.coordinator->ReportProgress(&context, report, &response),
               "reporting progress to the coordinator"));
  if (response.stop()) {
    return absl::CancelledError(
        absl::StrCat("the coordinator stopped the job: ", response.reason()));
  }
  return absl::OkStatus();
}

absl::Status JobRunner::Run() {
  RETURN_IF_ERROR(Setup());
  RETURN_IF_ERROR(Restore());
  const int64_t spe = plan_->steps_per_epoch();
  const int64_t total_epochs = (total_steps_ + spe - 1) / spe;
  const bool chief = a_.rank() == 0;
  const int64_t fp_every = a_.fingerprint_every_steps();
  Log(absl::StrFormat(
      "job %s generation %d: rank %d of %d, replicas %d-%d of %d, steps "
      "%d..%d, %s",
      a_.job(), a_.generation(), a_.rank(), a_.world_size(),
      a_.rank() * a_.replicas_per_worker(),
      (a_.rank() + 1) * a_.replicas_per_worker() - 1,
      a_.world_size() * a_.replicas_per_worker(), step_, total_steps_,
      buckets_ != nullptr
          ? absl::StrFormat(
                "%d gradient buckets over a ring of %d stream(s), messages "
                "up to %d KiB%s",
                buckets_->num_buckets(), transport_->lanes(),
                spec_.cluster.ring_chunk_kib, WireNote())
          : absl::StrCat(nccl() ? "gradients all-reduced by NCCL"
                                : "gradients summed by NCCL on this worker's "
                                  "GPUs, then over the gRPC ring",
                         WireNote())));
  BatchPrefetcher prefetcher(&train_, plan_.get(), replica_ids_,
                             replicas_->primary().input_shape(), step_,
                             total_steps_);
  lockstep::v1::ProgressReport pending;  // scalars and events not yet sent
  auto add_scalars =
      [&](const std::vector<std::pair<std::string, double>>& values) {
        for (const auto& [tag, v] : values) {
          auto* s = pending.add_scalars();
          s->set_step(step_);
          s->set_tag(tag);
          s->set_value(v);
        }
      };
  Clock::time_point last_report = Clock::now();
  while (step_ < total_steps_) {
    if (Stopped()) return absl::CancelledError("stopped by the coordinator");
    const Clock::time_point t0 = Clock::now();
    ASSIGN_OR_RETURN(Batch batch, prefetcher.Next());
    BatchLoss loss;
    int leaving = 0;
    RETURN_IF_ERROR(
        AnnotateStatus(Step(batch, prefetcher.PeekReady(), &loss, &leaving),
                       absl::StrCat("step ", batch.global_step)));
    const double dt = SecondsSince(t0);
    ++step_;
    RETURN_IF_ERROR(meter_.Add(step_, dt, batch.global_count, loss));
    if (ctx_.metrics != nullptr) {
      const BucketStats bs =
          buckets_ != nullptr ? buckets_->stats() : BucketStats();
      StepSample sample;
      sample.seconds = dt;
      sample.local_samples = batch.global_count / a_.world_size();
      sample.loss = loss.mean_loss();
      sample.accuracy = loss.accuracy();
      sample.allreduce_seconds = bs.allreduce_seconds;
      sample.wait_seconds = bs.wait_seconds;
      sample.allreduce_bytes = bs.bytes;
      ctx_.metrics->AddStep(step_, sample);
    }
    const bool epoch_end = step_ % spe == 0;
    const bool last = step_ == total_steps_;
    bool saved = false;  // a checkpoint of this step was uploaded
    if (chief && spec_.summary.every_steps > 0 &&
        step_ % spec_.summary.every_steps == 0) {
      const BatchLoss interval = meter_.TakeSummary();
      add_scalars(
          {{"train/loss", interval.mean_loss()},
           {"train/accuracy", interval.accuracy()},
           {"learning_rate", schedule_->At(step_ - 1)},
           {"samples_per_sec", meter_.run_rate()},
           {"allreduce_seconds",
            buckets_ != nullptr ? buckets_->stats().allreduce_seconds : 0.0},
           // The part of it the step waited for after backward: the rest
           // was hidden behind backward.
           {"allreduce_wait_seconds",
            buckets_ != nullptr ? buckets_->stats().wait_seconds : 0.0},
           {"step_seconds", dt}});
    }
    if (epoch_end || last) {
      const Clock::time_point e0 = Clock::now();
      absl::Status es;
      last_eval_ = Evaluate(step_, &es);
      RETURN_IF_ERROR(es);
      evaluated_ = true;
      last_epoch_ = meter_.epoch();
      if (chief) {
        pending.add_events(EpochDoneLine(a_.job(), (step_ + spe - 1) / spe,
                                         meter_.epoch(), last_eval_,
                                         SecondsSince(e0)));
        add_scalars(EpochScalars(meter_.epoch(), last_eval_));
      }
    }
    if (epoch_end || last ||
        (spec_.checkpoint.every_steps > 0 &&
         step_ % spec_.checkpoint.every_steps == 0)) {
      // The final parameters must be committed: wait for a coordinator that
      // is restarting, as Finish does. Earlier checkpoints are not waited for.
      saved = true;
      absl::Status cs =
          last ? WhileCoordinatorRestarts(
                     "the final checkpoint",
                     [&] { return Checkpoint(step_, meter_.epoch()); })
               : Checkpoint(step_, meter_.epoch());
      if (absl::IsCancelled(cs) || absl::IsFailedPrecondition(cs) ||
          absl::IsNotFound(cs)) {
        return cs;  // the job is over for this generation
      }
      if (!cs.ok()) {
        // An unreachable coordinator or a failed commit costs this
        // checkpoint, not the training: the previous one stays the latest.
        Log(
            absl::StrFormat("warning: checkpoint at step %d not saved, "
                            "training goes on: %s",
                            step_, cs.message()));
      }
    }
    const bool fingerprint = last || (fp_every > 0 && step_ % fp_every == 0);
    const bool report_due =
        chief && (SecondsSince(last_report) >= ctx_.report_interval_seconds ||
                  epoch_end || last || pending.events_size() > 0);
    if (fingerprint || report_due) {
      pending.set_step(step_);
      pending.set_total_steps(total_steps_);
      pending.set_epoch(
          std::min(step_ / spe + (epoch_end ? 0 : 1), total_epochs));
      pending.set_loss(meter_.epoch().mean_loss());
      pending.set_accuracy(meter_.epoch().accuracy());
      pending.set_samples_per_sec(meter_.TakeWindowRate());
      if (ctx_.metrics != nullptr) {
        ctx_.metrics->SetRate(pending.samples_per_sec());
      }
      pending.set_learning_rate(schedule_->At(step_ - 1));
      pending.set_eta_seconds(
          meter_.Eta(total_steps_ - step_, plan_->global_batch_size()));
      if (fingerprint) {
        pending.set_fingerprint_step(step_);
        RETURN_IF_ERROR(SyncHostState());
        pending.set_fingerprint(Fingerprint(replicas_->params()));
      }
      absl::Status rs = Report(pending);
      if (rs.ok()) {
        pending.Clear();
        if (coordinator_down_) Log("the coordinator is reachable again");
        coordinator_down_ = false;
      } else if (absl::IsUnavailable(rs) || absl::IsDeadlineExceeded(rs)) {
        // Training does not need the coordinator; the reports wait.
        if (!coordinator_down_) {
          Log(absl::StrCat(rs.message(), "; training goes on, reports wait"));
        }
        coordinator_down_ = true;
      } else {
        return rs;
      }
      last_report = Clock::now();
    }
    if (epoch_end) meter_.EndEpoch();
    // At the last step the job ends anyway: nothing to drain.
    if (leaving > 0 && !last) return Drain(leaving, saved);
  }
  prefetcher.Stop();
  if (!evaluated_) {  // e.g. restored at the last step
    absl::Status es;
    last_eval_ = Evaluate(step_, &es);
    RETURN_IF_ERROR(es);
  }
  return absl::OkStatus();
}

std::string JobRunner::Finish(const absl::Status& status) {
  lockstep::v1::FinishRequest req;
  req.set_worker_id(ctx_.worker_id);
  req.set_job(a_.job());
  req.set_generation(a_.generation());
  req.set_rank(a_.rank());
  req.set_leaving(drained_);
  if (!status.ok()) {
    req.set_error(std::string(status.message()));
    req.set_error_code(static_cast<int32_t>(status.code()));
    const int suspect = transport_ == nullptr ? -1 : transport_->suspect_rank();
    if (suspect >= 0) req.add_suspect_ranks(suspect);
  } else {
    req.set_steps(step_);
    absl::Status synced = SyncHostState();
    if (!synced.ok()) Log(absl::StrCat("warning: ", synced.message()));
    req.set_fingerprint(Fingerprint(replicas_->params()));
    req.set_train_loss(last_epoch_.mean_loss());
    req.set_train_accuracy(last_epoch_.accuracy());
    req.set_test_loss(last_eval_.mean_loss());
    req.set_test_accuracy(last_eval_.accuracy());
    req.set_samples_per_sec(meter_.run_rate());
    req.set_epochs(step_ / std::max<int64_t>(plan_->steps_per_epoch(), 1));
    req.set_num_parameters(replicas_->primary().num_parameters());
    for (const std::string& name : SkippedSamples({&train_, &test_shard_})) {
      req.add_skipped_samples(name);
    }
  }
  // The result must reach the coordinator, even one that is restarting.
  lockstep::v1::FinishResponse response;
  absl::Status s = WhileCoordinatorRestarts("Finish", [&] {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    response.Clear();
    return FromGrpc(ctx_.coordinator->Finish(&context, req, &response),
                    "Finish");
  });
  if (s.ok()) return response.over();
  Log(absl::StrCat("warning: ", s.message()));
  return "";
}

absl::Status JobRunner::WhileCoordinatorRestarts(
    const std::string& what, const std::function<absl::Status()>& call) {
  const Clock::time_point give_up = Clock::now() + std::chrono::minutes(10);
  absl::Status s = call();
  bool logged = false;
  while ((absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) &&
         !Stopped() && Clock::now() < give_up) {
    if (!logged) {
      Log(absl::StrCat(s.message(), "; retrying ", what, " every second"));
    }
    logged = true;
    std::this_thread::sleep_for(std::chrono::seconds(1));
    s = call();
  }
  return s;
}

}  // namespace

absl::Status RunAssignment(const Assignment& assignment,
                           const RunnerContext& context) {
  JobRunner runner(assignment, context);
  if (context.metrics != nullptr) {
    context.metrics->SetAssignment(assignment.job(), assignment.generation(),
                                   assignment.rank(), assignment.world_size());
  }
  absl::Status status = runner.Run();
  if (runner.uses_nccl() &&
      (absl::IsAborted(status) || absl::IsUnavailable(status) ||
       absl::IsDeadlineExceeded(status)) &&
      context.stop != nullptr) {
    // NCCL cannot say which rank failed: give the coordinator time to find
    // the lost worker (its heartbeats stop, or its ring stream breaks) and
    // end the generation, so that this worker is not blamed for a peer.
    const auto give_up = Clock::now() + std::chrono::seconds(20);
    while (!context.stop->load() && Clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  if (context.metrics != nullptr) {
    context.metrics->ClearAssignment();
    if (runner.drained()) context.metrics->AddLeave();
  }
  if (!status.ok() && !runner.drained() && context.stop != nullptr &&
      context.stop->load()) {
    // Whatever broke (usually an aborted collective) broke because the
    // coordinator stopped the job.
    status = absl::CancelledError(
        absl::StrCat("stopped by the coordinator (", status.message(), ")"));
  }
  const std::string over = runner.Finish(status);
  if (runner.drained() && context.left != nullptr) *context.left = true;
  if (!status.ok() && !absl::IsCancelled(status) && !over.empty()) {
    // The generation ended elsewhere first (a cancel, or a peer that
    // stopped or failed); this error is its echo.
    status = absl::CancelledError(absl::StrCat(
        "stopped with the generation: ", over, "; here: ", status.message()));
  }
  return status;
}

}  // namespace lockstep
