// ClusterHost (see cluster_host.h).
#include "worker/cluster_host.h"

#include <algorithm>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/seconds.h"
#include "base/status_macros.h"
#include "core/checkpoint/tensor_parts.h"
#include "core/fingerprint.h"
#include "core/train/gpu_backend.h"
#include "rpc/rpc_util.h"
#include "rpc/sample_wire.h"
#include "worker/checkpoint_rpc.h"
#include "worker/nccl_bootstrap.h"

namespace lockstep {
absl::StatusOr<std::optional<LoadedCheckpoint>>
ClusterHost::StartingCheckpoint() {
  if (a_.memory_step() > 0) {
    ASSIGN_OR_RETURN(LoadedCheckpoint state, KeptStateToStartFrom());
    return std::optional<LoadedCheckpoint>(std::move(state));
  }
  if (a_.start_step() == 0) return std::nullopt;
  absl::StatusOr<LoadedCheckpoint> loaded;
  (void)ctx_.coordinator->Run([&](CoordinatorStubs::Stub* stub) {
    loaded = FetchCheckpoint(stub, a_.job(), a_.start_step());
    return loaded.status();
  });
  if (!loaded.ok()) return loaded.status();
  return std::optional<LoadedCheckpoint>(*std::move(loaded));
}

absl::StatusOr<LoadedCheckpoint> ClusterHost::KeptPartsToStartFrom() {
  const int64_t step = a_.memory_step();
  const std::string what = absl::StrFormat(
      "the training state of step %d from the parts the ranks kept", step);
  // Which old ranks' parts each donor sends; memory_donor also sends the
  // tensors outside every part (and the state).
  std::map<int, std::vector<int>> asked;
  for (int k = 0; k < a_.memory_part_donors_size(); ++k) {
    asked[a_.memory_part_donors(k)].push_back(k);
  }
  asked[a_.memory_donor()];
  TensorParts model, optimizer;
  LoadedCheckpoint out;
  for (const auto& [donor, parts] : asked) {
    const bool whole = donor == a_.memory_donor();
    std::shared_ptr<const LoadedCheckpoint> own;
    LoadedCheckpoint fetched;
    const LoadedCheckpoint* from = &fetched;
    if (donor == a_.rank()) {
      own = ctx_.kept == nullptr ? nullptr : ctx_.kept->Get(a_.job(), step);
      if (own == nullptr) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "%s: this worker (rank %d) does not keep its parts", what, donor));
      }
      from = own.get();
    } else {
      if (donor < 0 || donor >= a_.peers_size()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: no rank %d", what, donor));
      }
      auto stub = lockstep::v1::WorkerState::NewStub(
          MakeChannel(a_.peers(donor), ctx_.tls));
      ASSIGN_OR_RETURN(fetched, FetchKeptState(stub.get(), a_.job(), step,
                                               donor, &parts, whole));
    }
    if (from->state.step != step) {
      return absl::DataLossError(absl::StrFormat(
          "%s: rank %d's is of step %d", what, donor, from->state.step));
    }
    if (whole) {
      out.state = from->state;
      out.model = from->model;
    }
    for (int kind = 0; kind < 2; ++kind) {
      for (const TensorPart& p :
           kind == 0 ? from->model_parts : from->optimizer_parts) {
        // Its own copy holds the previous rank's part too: only the asked.
        if (p.owner >= 0 &&
            std::find(parts.begin(), parts.end(), p.owner) == parts.end()) {
          continue;
        }
        RETURN_IF_ERROR(AnnotateStatus(
            (kind == 0 ? model : optimizer)
                .Add(absl::StrFormat("rank %d", donor), p.name, p.shape,
                     p.offset, p.data.data(), p.data.size()),
            what));
      }
    }
  }
  absl::Status covered = model.CheckCoverage(what, "parameter");
  if (covered.ok()) covered = optimizer.CheckCoverage(what, "optimizer state");
  if (!covered.ok()) return absl::DataLossError(covered.message());
  for (auto& [name, t] : model.tensors()) {
    out.model.emplace_back(name, std::move(t));
  }
  for (auto& [name, t] : optimizer.tensors()) {
    out.optimizer.emplace_back(name, std::move(t));
  }
  std::vector<int> donors;
  for (const auto& [donor, parts] : asked) donors.push_back(donor);
  out.path = absl::StrFormat("the parts ranks %s kept in memory (step %d)",
                             absl::StrJoin(donors, ", "), step);
  out.in_memory = true;
  return out;
}

absl::StatusOr<LoadedCheckpoint> ClusterHost::KeptStateToStartFrom() {
  if (a_.memory_part_donors_size() > 0) return KeptPartsToStartFrom();
  const int64_t step = a_.memory_step();
  const std::string& want = a_.memory_fingerprint();
  if (ctx_.kept != nullptr) {
    std::shared_ptr<const LoadedCheckpoint> own =
        ctx_.kept->Get(a_.job(), step, want);
    if (own != nullptr) {
      LoadedCheckpoint copy = *own;
      copy.path = absl::StrFormat("this worker's memory (step %d)", step);
      copy.in_memory = true;
      return copy;
    }
  }
  const int donor = a_.memory_donor();
  if (donor < 0 || donor >= a_.peers_size() || donor == a_.rank()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the generation starts from rank %d's memory of step %d, which this "
        "worker (rank %d) does not hold",
        donor, step, a_.rank()));
  }
  auto stub = lockstep::v1::WorkerState::NewStub(
      MakeChannel(a_.peers(donor), ctx_.tls));
  ASSIGN_OR_RETURN(LoadedCheckpoint got,
                   FetchKeptState(stub.get(), a_.job(), step, donor));
  std::vector<const Tensor*> values;
  for (const auto& [name, t] : got.model) values.push_back(&t);
  const std::string fingerprint = FingerprintTensors(values);
  if (got.state.step != step || fingerprint != want) {
    return absl::DataLossError(absl::StrFormat(
        "rank %d's kept state is of step %d with fingerprint %s; the "
        "coordinator announced step %d with %s",
        donor, got.state.step, fingerprint, step, want));
  }
  return got;
}

absl::StatusOr<std::string> ClusterHost::NcclId() {
  // NCCL over every worker: rank 0 makes the generation's ncclUniqueId and
  // the coordinator relays it. The ring layout: this worker's own.
  if (a_.collective() != "nccl") return NewNcclId();
  // Through every coordinator it knows: a standby answers UNAVAILABLE and
  // the next call goes to the next one; with several, a call waits 5 s at
  // most (StepCallTimeout), so a paused leader is left within seconds.
  CoordinatorStubs& stubs = *ctx_.coordinator;
  return BootstrapNcclId(
      [&stubs](const CoordinatorCall& call) { return stubs.Run(call); },
      ctx_.worker_id, a_.job(), a_.generation(), a_.rank(), &NewNcclId,
      absl::Seconds(120),
      stubs.size() > 1 ? absl::Seconds(stubs.StepCallTimeout().count())
                       : absl::Seconds(300));
}

absl::Status ClusterHost::SaveCheckpoint(const CheckpointState& state,
                                         const NamedTensors& model,
                                         const OptimizerParts& optimizer,
                                         bool final) {
  // The step's report first: its events (the epoch's line) come before
  // the checkpoint's commit in the job's log, as they happened.
  RETURN_IF_ERROR(SendDueReport());
  SliceInfo info{ctx_.worker_id, a_.job(),        a_.generation(),
                 a_.rank(),      a_.world_size(), final};
  auto upload = [&] {
    const Clock::time_point t0 = Clock::now();
    absl::Status s = ctx_.coordinator->Run([&](CoordinatorStubs::Stub* stub) {
      return UploadCheckpointSlice(stub, info, state, model, optimizer);
    });
    if (ctx_.metrics != nullptr) {
      ctx_.metrics->AddCheckpointUpload(SecondsSince(t0), s.ok());
    }
    return s;
  };
  // The final parameters must be committed: wait for a coordinator that is
  // restarting, as Finish does. Earlier checkpoints are not waited for.
  absl::Status s =
      final ? WhileCoordinatorRestarts("the final checkpoint", upload)
            : upload();
  if (s.ok() || absl::IsCancelled(s) || absl::IsFailedPrecondition(s) ||
      absl::IsNotFound(s)) {
    return s;  // an error: the job is over for this generation
  }
  if (final) {
    // The job's product: without it on storage the job has not succeeded.
    // The coordinator ended the generation (CheckpointSlice.final); this
    // error makes the rank keep its state in memory, from which the next
    // generation commits it again, until the job's restarts run out.
    return AnnotateStatus(
        s, absl::StrFormat("the final checkpoint (step %d) was not committed",
                           state.step));
  }
  // An unreachable coordinator or a failed commit costs this checkpoint,
  // not the training: the previous one stays the latest.
  Log(absl::StrFormat(
      "warning: checkpoint at step %d not saved, training goes on: %s",
      state.step, s.message()));
  return absl::OkStatus();
}

bool ClusterHost::ProgressDue(int64_t step, bool boundary) {
  return chief() &&
         (boundary || pending_.events_size() > 0 ||
          SecondsSince(last_report_) >= ctx_.report_interval_seconds);
}

void ClusterHost::StepDone(const StepFigures& f) {
  // First: the step's end, before anything else this hook does.
  if (!ctx_.step_times.empty()) step_times_.Add(f.step, UnixSeconds());
  step_ = f.step;
  if (ctx_.metrics == nullptr) return;
  StepSample sample;
  sample.seconds = f.seconds;
  sample.local_samples = f.local_samples;
  sample.loss = f.loss.mean_loss();
  sample.accuracy = f.loss.accuracy();
  sample.allreduce_seconds = f.buckets.allreduce_seconds;
  sample.wait_seconds = f.buckets.wait_seconds;
  sample.allreduce_bytes = f.buckets.bytes;
  ctx_.metrics->AddStep(f.step, sample);
}

absl::Status ClusterHost::Progress(const ProgressInfo& info,
                                   const std::string* fingerprint) {
  pending_.set_step(info.step);
  pending_.set_total_steps(info.total_steps);
  pending_.set_epoch(info.epoch);
  pending_.set_loss(info.loss);
  pending_.set_accuracy(info.accuracy);
  pending_.set_samples_per_sec(info.samples_per_sec);
  if (ctx_.metrics != nullptr) ctx_.metrics->SetRate(info.samples_per_sec);
  pending_.set_learning_rate(info.learning_rate);
  pending_.set_eta_seconds(info.eta_seconds);
  pending_.set_optimizer_state_bytes(info.optimizer_state_bytes);
  pending_.set_loss_scale(info.loss_scale);
  pending_.set_skipped_steps(info.skipped_steps);
  if (fingerprint != nullptr) {
    pending_.set_fingerprint_step(info.step);
    pending_.set_fingerprint(*fingerprint);
  }
  report_due_ = true;  // sent at the step's end, with its events
  return absl::OkStatus();
}

absl::Status ClusterHost::Scalars(int64_t step, const ScalarList& values) {
  if (!chief()) return absl::OkStatus();
  for (const auto& [tag, v] : values) {
    auto* s = pending_.add_scalars();
    s->set_step(step);
    s->set_tag(tag);
    s->set_value(v);
  }
  return absl::OkStatus();
}

absl::Status ClusterHost::EndStep(int64_t step) {
  if (!ctx_.step_times.empty()) step_times_.End(UnixSeconds());
  if (!kept_released_ && ctx_.kept != nullptr) {
    // Every rank has its state once a step's all-reduce is done: what a
    // failed generation kept (and peers may have fetched) can go.
    ctx_.kept->Clear();
    kept_released_ = true;
  }
  return SendDueReport();
}

absl::Status ClusterHost::SendDueReport() {
  if (!report_due_) return absl::OkStatus();
  report_due_ = false;
  last_report_ = Clock::now();
  absl::Status rs = Report(pending_);
  if (rs.ok()) {
    pending_.Clear();
    if (coordinator_down_) Log("the coordinator is reachable again");
    coordinator_down_ = false;
    return absl::OkStatus();
  }
  if (absl::IsUnavailable(rs) || absl::IsDeadlineExceeded(rs)) {
    // Training does not need the coordinator; the reports wait.
    if (!coordinator_down_) {
      Log(absl::StrCat(rs.message(), "; training goes on, reports wait"));
    }
    coordinator_down_ = true;
    return absl::OkStatus();
  }
  return rs;
}

absl::Status ClusterHost::Report(lockstep::v1::ProgressReport& report) {
  report.set_worker_id(ctx_.worker_id);
  report.set_job(a_.job());
  report.set_generation(a_.generation());
  report.set_rank(a_.rank());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       ctx_.coordinator->StepCallTimeout());
  lockstep::v1::ReportResponse response;
  RETURN_IF_ERROR(ctx_.coordinator->Run([&](CoordinatorStubs::Stub* stub) {
    return FromGrpc(stub->ReportProgress(&context, report, &response),
                    "reporting progress to the coordinator");
  }));
  if (response.stop()) {
    return absl::CancelledError(
        absl::StrCat("the coordinator stopped the job: ", response.reason()));
  }
  return absl::OkStatus();
}

absl::Status ClusterHost::SamplesTaken(SampleRecord& record) {
  record.generation = a_.generation();
  record.rank = a_.rank();
  lockstep::v1::SampleRecord m = SampleRecordToWire(record);
  m.set_worker_id(ctx_.worker_id);
  m.set_job(a_.job());
  lockstep::v1::ReportResponse response;
  RETURN_IF_ERROR(WhileCoordinatorRestarts("the sample record", [&] {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         ctx_.coordinator->StepCallTimeout());
    return ctx_.coordinator->Run([&](CoordinatorStubs::Stub* stub) {
      return FromGrpc(stub->RecordSamples(&context, m, &response),
                      "recording the step's samples with the coordinator");
    });
  }));
  if (response.stop()) {
    return absl::CancelledError(
        absl::StrCat("the coordinator stopped the job: ", response.reason()));
  }
  return absl::OkStatus();
}

absl::Status ClusterHost::WhileCoordinatorRestarts(
    const std::string& what, const std::function<absl::Status()>& call) {
  const Clock::time_point give_up = Clock::now() + std::chrono::minutes(10);
  absl::Status s = call();
  bool logged = false;
  while ((absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) &&
         !StopRequested() && Clock::now() < give_up) {
    if (!logged) {
      Log(absl::StrCat(s.message(), "; retrying ", what, " every second"));
    }
    logged = true;
    std::this_thread::sleep_for(std::chrono::seconds(1));
    s = call();
  }
  return s;
}

void ClusterHost::WriteStepTimes() {
  if (ctx_.step_times.empty()) return;
  absl::Status s = AppendStepTimes(
      ctx_.step_times,
      step_times_.JsonLine(a_.job(), a_.generation(), a_.rank()));
  if (!s.ok()) Log(absl::StrCat("warning: ", s.message()));
}

}  // namespace lockstep
