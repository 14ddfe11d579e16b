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
                                   const OptimizerParts& optimizer) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::minutes(10));
  lockstep::v1::CheckpointAck ack;
  auto writer = stub->UploadCheckpoint(&context, &ack);
  CheckpointSlice msg;
  CheckpointStateToSlice(state, &msg);
  msg.set_worker_id(info.worker_id);
  msg.set_job(info.job);
  msg.set_generation(info.generation);
  msg.set_rank(info.rank);
  msg.set_world_size(info.world_size);
  msg.set_model_tensors(static_cast<int32_t>(model.size()));
  msg.set_optimizer_tensors(static_cast<int32_t>(optimizer.tensors));
  msg.set_sharded_optimizer(optimizer.sharded);
  msg.set_final(info.final);
  if (info.rank != 0) msg.clear_artifacts();  // one copy is enough
  bool sent_any = false;
  auto send = [&] {
    if (!writer->Write(msg)) return false;
    sent_any = true;
    // Header fields ride on the first message only.
    msg.clear_job_json();
    msg.clear_artifacts();
    return true;
  };
  // Dealt i % world: the model tensors, and then (whole) the optimizer's.
  const size_t dealt =
      model.size() + (optimizer.sharded ? 0 : optimizer.pieces.size());
  bool open = true;
  for (size_t i = info.rank; open && i < dealt; i += info.world_size) {
    const bool is_opt = i >= model.size();
    if (is_opt) {
      const StatePiece& p = optimizer.pieces[i - model.size()];
      TensorToWire(p.name, true, *p.data, msg.mutable_tensor());
    } else {
      TensorToWire(model[i].first, false, *model[i].second,
                   msg.mutable_tensor());
    }
    open = send();
  }
  for (size_t k = 0; open && optimizer.sharded && k < optimizer.pieces.size();
       ++k) {
    const StatePiece& p = optimizer.pieces[k];
    lockstep::v1::TensorData* t = msg.mutable_tensor();
    TensorToWire(p.name, true, *p.data, t);
    t->set_offset(p.offset);
    for (int64_t d : p.shape) t->add_whole_shape(d);
    open = send();
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
    lockstep::v1::WorkerState::Stub* stub, const std::string& job, int64_t step,
    int donor, const std::vector<int>* parts, bool whole) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::minutes(10));
  lockstep::v1::FetchStateRequest req;
  req.set_job(job);
  req.set_step(step);
  if (parts != nullptr) {
    for (int p : *parts) req.add_parts(p);
    req.set_whole(whole);
  }
  auto reader = stub->FetchState(&context, req);
  ASSIGN_OR_RETURN(
      LoadedCheckpoint loaded,
      ReadCheckpointStream(
          reader.get(),
          absl::StrFormat("fetching rank %d's kept state of step %d", donor,
                          step),
          parts != nullptr));
  loaded.path = absl::StrFormat("rank %d's memory (step %d)", donor, step);
  loaded.in_memory = true;
  return loaded;
}

}  // namespace lockstep
