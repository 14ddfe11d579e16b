// A worker's rank of a cluster job (see job_runner.h): a TrainingSession
// over this worker's replicas, with the gRPC ring to the other workers, and
// a host that reports to the coordinator: progress, summaries and events
// from rank 0, fingerprints from every rank, checkpoint slices, the drain
// and the finish.
#include "worker/job_runner.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/seconds.h"
#include "base/status_macros.h"
#include "core/job/job_spec.h"
#include "core/train/gpu_backend.h"
#include "core/train/training_session.h"
#include "rpc/rpc_util.h"
#include "worker/cluster_host.h"
#include "worker/keep_run_state.h"

namespace lockstep {
namespace {

using lockstep::v1::Assignment;
// One rank's run: the session, the drain when ranks leave, and Finish.
class JobRunner {
 public:
  JobRunner(const Assignment& a, const RunnerContext& ctx)
      : a_(a), ctx_(ctx), host_(a, ctx) {}
  ~JobRunner() {
    watch_done_ = true;
    if (abort_watch_.joinable()) abort_watch_.join();
    if (transport_ != nullptr) ctx_.collective->Detach(transport_.get());
  }
  absl::Status Run();
  // Tells the coordinator how the run ended; returns FinishResponse.over
  // ("" when the report counted).
  std::string Finish(const absl::Status& status);
  // A run that ended early: its state into RunnerContext::kept, and
  // held_step/held_fingerprint into `req` (nothing on GPU replicas, after a
  // drain, or at step 0).
  void KeepState(lockstep::v1::FinishRequest& req);
  // This rank ended the generation because it shuts down (Finish says
  // `leaving`).
  bool drained() const { return drained_; }
  // The workers' sum runs in NCCL (collective "nccl"), which cannot say
  // which rank failed; GPU replicas whose workers meet on the gRPC ring
  // know the broken neighbour like CPU ones.
  bool uses_nccl() const { return session_ != nullptr && nccl(); }
  void WriteStepTimes() { host_.WriteStepTimes(); }

 private:
  absl::Status Start();
  // After a step in which ranks said they shut down: a checkpoint of the
  // step (unless one was saved), a barrier so it is committed before anyone
  // reports, then the generation ends (see RunAssignment).
  absl::Status Drain();
  // After the step at which the ranks agreed to regroup (workers join):
  // GPU replicas save and commit a checkpoint of it; returns the Cancelled
  // status that ends the run (Finish says `regroup`).
  absl::Status Regroup();
  bool nccl() const { return a_.collective() == "nccl"; }
  RingOptions Ring() const;
  // For the start line: what cluster.compression does on this path.
  std::string WireNote() const;

  const Assignment& a_;
  const RunnerContext& ctx_;
  ClusterHost host_;
  JobSpec spec_;
  std::shared_ptr<GrpcRingTransport> transport_;
  std::unique_ptr<TrainingSession> session_;
  std::thread abort_watch_;  // aborts the GPUs' collectives on STOP
  std::atomic<bool> watch_done_{false};
  bool drained_ = false;
  bool regroup_ = false;  // ended by Regroup()
};

RingOptions JobRunner::Ring() const {
  RingOptions o;
  o.timeout = ctx_.collective_timeout;
  o.chunk_elements =
      spec_.cluster.ring_chunk_kib * 1024 / static_cast<int64_t>(sizeof(float));
  return o;
}

std::string JobRunner::WireNote() const {
  if (spec_.cluster.compression == Compression::kNone) return "";
  return nccl() ? " (in float32: cluster.compression applies to the gRPC "
                  "ring only)"
                : ", as bfloat16 on the wire (cluster.compression)";
}

absl::Status JobRunner::Start() {
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
  GrpcRingOptions ring;
  ring.job = a_.job();
  ring.generation = a_.generation();
  ring.rank = a_.rank();
  ring.peers.assign(a_.peers().begin(), a_.peers().end());
  ring.lanes = spec_.cluster.ring_streams > 0
                   ? static_cast<int>(spec_.cluster.ring_streams)
                   : ctx_.lanes;
  ring.tls = ctx_.tls;
  ring.keepalive_timeout_ms = ctx_.ring_keepalive_timeout_ms;
  ring.checksum = spec_.cluster.ring_checksum;
  transport_ = std::make_shared<GrpcRingTransport>(ring);
  ctx_.collective->Attach(transport_);

  SessionConfig c;
  c.spec = spec_;
  c.job_json = a_.job_json();
  for (int64_t i = 0; i < r; ++i) c.replicas.push_back(a_.rank() * r + i);
  c.world_replicas = a_.world_size() * r;
  c.rank = a_.rank();
  c.world = a_.world_size();
  c.threads = ctx_.threads;
  c.cuda_devices = ctx_.cuda_devices;
  c.report_fingerprints = true;
  c.fingerprint_every_steps = a_.fingerprint_every_steps();
  c.peers.transport = transport_.get();
  c.peers.generation = a_.generation();
  c.peers.ring = Ring();
  c.peers.gradient_ring = Ring();
  if (spec_.cluster.compression == Compression::kBf16) {
    c.peers.gradient_ring.wire = WireType::kBfloat16;  // gradients only
  }
  c.peers.bucket_bytes = spec_.cluster.bucket_kib * 1024;
  c.peers.nccl = nccl();
  ASSIGN_OR_RETURN(session_, TrainingSession::Create(std::move(c), &host_));
  if (!session_->restored_from().empty()) {
    host_.Log(absl::StrFormat("restored %s: resuming at step %d",
                              session_->restored_from(), session_->step()));
  }
  if (session_->sharded()) {
    host_.Log(absl::StrFormat(
        "optimizer state sharded over %d workers (cluster.shard %s): %.1f "
        "MiB of it here%s",
        a_.world_size(), ShardModeName(spec_.cluster.shard),
        session_->optimizer_state_bytes() / 1048576.0,
        spec_.cluster.shard == ShardMode::kGradients
            ? "; between steps only its part of the gradients is kept"
            : ""));
  }
  if (session_->uses_devices()) {
    // A STOP must reach a collective blocked inside NCCL too.
    abort_watch_ = std::thread([this] {
      while (!watch_done_.load()) {
        if (host_.StopRequested()) {
          session_->Abort();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
    host_.Log(absl::StrFormat(
        "NCCL communicator of %d GPUs ready on cuda:%s%s",
        nccl() ? a_.world_size() * r : r,
        absl::StrJoin(ctx_.cuda_devices, ",cuda:"),
        nccl() ? "" : "; the workers' sum goes over the gRPC ring"));
  }
  const GradientBuckets* buckets = session_->buckets();
  host_.Log(absl::StrFormat(
      "job %s generation %d: rank %d of %d, replicas %d-%d of %d, steps "
      "%d..%d, %s",
      a_.job(), a_.generation(), a_.rank(), a_.world_size(), a_.rank() * r,
      (a_.rank() + 1) * r - 1, a_.world_size() * r, session_->step(),
      session_->total_steps(),
      buckets != nullptr
          ? absl::StrFormat(
                "%d gradient buckets over a ring of %d stream(s), messages "
                "up to %d KiB%s",
                buckets->num_buckets(), transport_->lanes(),
                spec_.cluster.ring_chunk_kib, WireNote())
          : absl::StrCat(nccl() ? "gradients all-reduced by NCCL"
                                : "gradients summed by NCCL on this worker's "
                                  "GPUs, then over the gRPC ring",
                         WireNote())));
  return absl::OkStatus();
}

absl::Status JobRunner::Run() {
  RETURN_IF_ERROR(Start());
  ASSIGN_OR_RETURN(TrainingSession::Outcome outcome, session_->Run());
  switch (outcome) {
    case TrainingSession::Outcome::kFinished:
      return absl::OkStatus();
    case TrainingSession::Outcome::kStopped:
      return absl::CancelledError("stopped by the coordinator");
    case TrainingSession::Outcome::kLeaving:
      return Drain();
    case TrainingSession::Outcome::kRegroup:
      return Regroup();
  }
  return absl::InternalError("unknown outcome");
}

absl::Status JobRunner::Drain() {
  const int leaving = session_->leaving();
  const int64_t step = session_->step();
  host_.Log(absl::StrFormat(
      "%s shutting down: the generation ends after this step",
      host_.Leaving() ? "this worker is"
                      : absl::StrFormat("%d worker%s", leaving,
                                        leaving == 1 ? " is" : "s are")));
  if (a_.rank() == 0) {
    const StepMeter& meter = session_->meter();
    lockstep::v1::ProgressReport r;
    r.set_step(step);
    r.set_total_steps(session_->total_steps());
    r.set_loss(meter.epoch().mean_loss());
    r.set_accuracy(meter.epoch().accuracy());
    r.set_samples_per_sec(meter.run_rate());
    r.set_eta_seconds(-1);
    r.add_events(absl::StrFormat(
        "%d worker%s shutting down: generation %d ends after step %d with a "
        "checkpoint of it",
        leaving, leaving == 1 ? " is" : "s are", a_.generation(), step));
    host_.Report(r)
        .IgnoreError();  // a report that cannot be sent costs nothing
  }
  // Unless saved at this step already. A checkpoint that cannot be
  // uploaded is named in the log (the host) and the drain goes on.
  RETURN_IF_ERROR(session_->SaveCheckpoint());
  // Every rank has uploaded its slice once this returns, so the checkpoint
  // is committed before the leaving rank's Finish ends the generation.
  RETURN_IF_ERROR(
      AnnotateStatus(session_->Barrier(kDrainBucket), "the drain barrier"));
  if (host_.Leaving()) {
    drained_ = true;
    return absl::CancelledError(absl::StrFormat(
        "the worker is shutting down: left after step %d", step));
  }
  // The leaving rank's Finish ends the generation; the STOP follows at the
  // next heartbeat.
  const Clock::time_point give_up = Clock::now() + std::chrono::minutes(1);
  while (!host_.StopRequested() && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (host_.StopRequested()) {
    return absl::CancelledError("stopped by the coordinator");
  }
  return absl::UnavailableError(absl::StrFormat(
      "%d worker(s) shut down after step %d, but the coordinator did not end "
      "the generation within a minute",
      leaving, step));
}

absl::Status JobRunner::Regroup() {
  regroup_ = true;
  const int64_t step = session_->step();
  host_.Log(absl::StrFormat(
      "workers join the job: generation %d ends after step %d", a_.generation(),
      step));
  if (!session_->state_in_memory()) {
    // The state is not kept in memory (CopyState: GPUs, or sharded
    // optimizer state): the next generation starts from a checkpoint of
    // this step, committed by every rank before anyone reports.
    RETURN_IF_ERROR(session_->SaveCheckpoint());
    RETURN_IF_ERROR(AnnotateStatus(session_->Barrier(kDrainBucket),
                                   "the regroup barrier"));
  }
  return absl::CancelledError(absl::StrFormat(
      "generation %d ended after step %d: workers join the job",
      a_.generation(), step));
}

void JobRunner::KeepState(lockstep::v1::FinishRequest& req) {
  if (session_ == nullptr || ctx_.kept == nullptr || drained_ ||
      session_->step() == 0) {
    return;  // a drain committed its checkpoint; step 0 is a fresh start
  }
  KeepRunState(
      *session_, a_, *ctx_.kept,
      [this](const std::string& line) { host_.Log(line); }, req);
}

std::string JobRunner::Finish(const absl::Status& status) {
  lockstep::v1::FinishRequest req;
  req.set_worker_id(ctx_.worker_id);
  req.set_job(a_.job());
  req.set_generation(a_.generation());
  req.set_rank(a_.rank());
  req.set_leaving(drained_);
  if (regroup_) {
    // Not a failure: the coordinator asked for it, and the next generation
    // starts from what the ranks keep (or, on GPUs, the checkpoint of it).
    req.set_regroup(true);
    req.set_steps(session_->step());
    KeepState(req);
  } else if (!status.ok() || session_ == nullptr) {
    req.set_error(std::string(status.message()));
    req.set_error_code(static_cast<int32_t>(status.code()));
    const int suspect = transport_ == nullptr ? -1 : transport_->suspect_rank();
    if (suspect >= 0) req.add_suspect_ranks(suspect);
    KeepState(req);
  } else {
    absl::StatusOr<SessionResult> r = session_->Result();
    if (!r.ok()) {
      host_.Log(absl::StrCat("warning: ", r.status().message()));
    } else {
      req.set_steps(r->steps);
      req.set_fingerprint(r->fingerprint);
      req.set_train_loss(r->train.mean_loss());
      req.set_train_accuracy(r->train.accuracy());
      req.set_test_loss(r->test.mean_loss());
      req.set_test_accuracy(r->test.accuracy());
      req.set_samples_per_sec(r->samples_per_sec);
      req.set_epochs(r->epochs);
      req.set_num_parameters(r->num_parameters);
      req.set_optimizer_state_bytes(r->optimizer_state_bytes);
      req.set_loss_scale(r->loss_scale.scale);
      req.set_skipped_steps(r->loss_scale.skipped_steps);
      for (const std::string& name : r->skipped_samples) {
        req.add_skipped_samples(name);
      }
    }
  }
  // The result must reach the coordinator, even one that is restarting.
  lockstep::v1::FinishResponse response;
  absl::Status s = host_.WhileCoordinatorRestarts("Finish", [&] {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    response.Clear();
    return ctx_.coordinator->Run([&](CoordinatorStubs::Stub* stub) {
      return FromGrpc(stub->Finish(&context, req, &response), "Finish");
    });
  });
  if (s.ok()) return response.over();
  host_.Log(absl::StrCat("warning: ", s.message()));
  return "";
}

}  // namespace

absl::Status RunAssignment(const Assignment& assignment,
                           const RunnerContext& context) {
  JobRunner runner(assignment, context);
  if (context.metrics != nullptr) {
    context.metrics->SetAssignment(assignment.job(), assignment.generation(),
                                   assignment.rank(), assignment.world_size());
  }
  absl::Status status;
  try {
    status = runner.Run();
  } catch (const std::bad_alloc&) {
    // Reported as the job's own error (the coordinator fails the job, as
    // for a model that does not fit the data), not a crash of the daemon
    // and not a fault of this worker to retry elsewhere. The replicas',
    // prefetch and bucket threads carry theirs here (StepPool::Run,
    // BatchPrefetcher::Next, GradientBuckets::FinishStep rethrow them).
    status = absl::FailedPreconditionError(
        "out of memory on this worker (std::bad_alloc): the job's model, "
        "batch or data does not fit in its memory (or its limit)");
  }
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
  runner.WriteStepTimes();  // after Finish: the coordinator hears first
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
