#include "rpc/checkpoint_stream.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "rpc/checkpoint_wire.h"
#include "rpc/rpc_util.h"
#include "rpc/tensor_wire.h"

namespace lockstep {

using lockstep::v1::CheckpointSlice;

bool WriteCheckpointStream(const LoadedCheckpoint& c, const std::string& job,
                           grpc::ServerWriterInterface<CheckpointSlice>* writer) {
  CheckpointSlice m;
  m.set_job(job);
  CheckpointStateToSlice(c.state, &m);
  m.set_model_tensors(static_cast<int32_t>(c.model.size()));
  m.set_optimizer_tensors(static_cast<int32_t>(c.optimizer.size()));
  for (int part = 0; part < 2; ++part) {
    for (const auto& [name, t] : part == 0 ? c.model : c.optimizer) {
      TensorToWire(name, part == 1, t, m.mutable_tensor());
      if (!writer->Write(m)) return false;
      m.clear_job_json();
      m.clear_artifacts();
    }
  }
  return true;
}

absl::StatusOr<LoadedCheckpoint> ReadCheckpointStream(
    grpc::ClientReaderInterface<CheckpointSlice>* reader,
    const std::string& what) {
  LoadedCheckpoint loaded;
  CheckpointSlice msg;
  bool first = true;
  absl::Status bad;
  while (reader->Read(&msg)) {
    if (first) {
      loaded.state = CheckpointStateFromSlice(msg);
      first = false;
    }
    if (!msg.has_tensor() || !bad.ok()) continue;
    if (msg.tensor().whole_shape_size() > 0) {
      bad = absl::InvalidArgumentError(
          absl::StrCat("tensor ", msg.tensor().name(),
                       ": a part of a tensor where whole ones were expected"));
      continue;
    }
    absl::StatusOr<Tensor> t = TensorFromWire(msg.tensor());
    if (!t.ok()) {
      bad = t.status();
      continue;
    }
    (msg.tensor().optimizer() ? loaded.optimizer : loaded.model)
        .emplace_back(msg.tensor().name(), *std::move(t));
  }
  RETURN_IF_ERROR(FromGrpc(reader->Finish(), what));
  RETURN_IF_ERROR(AnnotateStatus(bad, what));
  if (first) return absl::DataLossError(what + ": the stream was empty");
  return loaded;
}

}  // namespace lockstep
