// Checkpoint slices over the coordinator service.
#include "worker/checkpoint_rpc.h"

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "rpc/checkpoint_stream.h"
#include "rpc/checkpoint_wire.h"
#include "rpc/rpc_util.h"
#include "rpc/tensor_wire.h"

namespace lockstep {

using lockstep::v1::CheckpointSlice;

absl::Status UploadCheckpointSlice(lockstep::v1::Coordinator::Stub* stub,
                                   const SliceInfo& info,
                                   const CheckpointState& state,
                                   const NamedTensors& model,
                                   const NamedTensors& optimizer) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::minutes(10));
  lockstep::v1::CheckpointAck ack;
  auto writer = stub->UploadCheckpoint(&context, &ack);
  CheckpointSlice msg;
  CheckpointStateToSlice(state, &msg);
  msg.set_job(info.job);
  msg.set_generation(info.generation);
  msg.set_rank(info.rank);
  msg.set_world_size(info.world_size);
  msg.set_model_tensors(static_cast<int32_t>(model.size()));
  msg.set_optimizer_tensors(static_cast<int32_t>(optimizer.size()));
  if (info.rank != 0) msg.clear_artifacts();  // one copy is enough
  const size_t total = model.size() + optimizer.size();
  bool sent_any = false;
  for (size_t i = info.rank; i < total; i += info.world_size) {
    const bool is_opt = i >= model.size();
    const auto& [name, tensor] =
        is_opt ? optimizer[i - model.size()] : model[i];
    TensorToWire(name, is_opt, *tensor, msg.mutable_tensor());
    if (!writer->Write(msg)) break;
    sent_any = true;
    // Header fields ride on the first message only.
    msg.clear_job_json();
    msg.clear_artifacts();
  }
  if (!sent_any) {
    msg.clear_tensor();
    writer->Write(msg);  // a slice with no tensors still reports in
  }
  writer->WritesDone();
  return FromGrpc(writer->Finish(),
                  absl::StrFormat("uploading checkpoint slice %d/%d of step %d",
                                  info.rank, info.world_size, state.step));
}

absl::StatusOr<LoadedCheckpoint> FetchCheckpoint(
    lockstep::v1::Coordinator::Stub* stub, const std::string& job,
    int64_t step) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::minutes(10));
  lockstep::v1::FetchCheckpointRequest req;
  req.set_job(job);
  req.set_step(step);
  auto reader = stub->FetchCheckpoint(&context, req);
  ASSIGN_OR_RETURN(
      LoadedCheckpoint loaded,
      ReadCheckpointStream(reader.get(),
                           absl::StrFormat("fetching checkpoint step %d of "
                                           "job %s",
                                           step, job)));
  loaded.path =
      absl::StrFormat("%s (from the coordinator)", CheckpointFolderName(step));
  return loaded;
}

absl::StatusOr<LoadedCheckpoint> FetchKeptState(
    lockstep::v1::WorkerState::Stub* stub, const std::string& job,
    int64_t step, int donor) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::minutes(10));
  lockstep::v1::FetchStateRequest req;
  req.set_job(job);
  req.set_step(step);
  auto reader = stub->FetchState(&context, req);
  ASSIGN_OR_RETURN(
      LoadedCheckpoint loaded,
      ReadCheckpointStream(
          reader.get(),
          absl::StrFormat("fetching rank %d's kept state of step %d", donor,
                          step)));
  loaded.path = absl::StrFormat("rank %d's memory (step %d)", donor, step);
  return loaded;
}

}  // namespace lockstep
