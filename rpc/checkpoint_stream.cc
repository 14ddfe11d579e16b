#include "rpc/checkpoint_stream.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "rpc/checkpoint_wire.h"
#include "rpc/rpc_util.h"
#include "rpc/tensor_wire.h"

namespace lockstep {

using lockstep::v1::CheckpointSlice;

bool WriteCheckpointStream(const LoadedCheckpoint& c, const std::string& job,
                           grpc::ServerWriterInterface<CheckpointSlice>* writer,
                           const std::vector<int>* parts, bool whole) {
  CheckpointSlice m;
  m.set_job(job);
  CheckpointStateToSlice(c.state, &m);
  m.set_model_tensors(static_cast<int32_t>(c.model.size()));
  m.set_optimizer_tensors(static_cast<int32_t>(c.optimizer.size()));
  bool first = true;
  auto write = [&] {
    if (!writer->Write(m)) return false;
    m.clear_job_json();
    m.clear_artifacts();
    first = false;
    return true;
  };
  for (int kind = 0; kind < 2 && whole; ++kind) {
    for (const auto& [name, t] : kind == 0 ? c.model : c.optimizer) {
      TensorToWire(name, kind == 1, t, m.mutable_tensor());
      if (!write()) return false;
    }
  }
  for (int kind = 0; kind < 2 && parts != nullptr; ++kind) {
    for (const TensorPart& p : kind == 0 ? c.model_parts : c.optimizer_parts) {
      if (std::find(parts->begin(), parts->end(), p.owner) == parts->end()) {
        continue;
      }
      TensorToWire(p.name, kind == 1, p.data, m.mutable_tensor());
      m.mutable_tensor()->set_offset(p.offset);
      for (int64_t d : p.shape) m.mutable_tensor()->add_whole_shape(d);
      if (!write()) return false;
    }
  }
  if (first) {
    m.clear_tensor();  // the state alone
    return writer->Write(m);
  }
  return true;
}

absl::StatusOr<LoadedCheckpoint> ReadCheckpointStream(
    grpc::ClientReaderInterface<CheckpointSlice>* reader,
    const std::string& what, bool parts) {
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
    const bool part = msg.tensor().whole_shape_size() > 0;
    if (part && !parts) {
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
    if (part) {
      TensorPart p;
      p.name = msg.tensor().name();
      p.shape.assign(msg.tensor().whole_shape().begin(),
                     msg.tensor().whole_shape().end());
      p.offset = msg.tensor().offset();
      p.data = *std::move(t);
      (msg.tensor().optimizer() ? loaded.optimizer_parts : loaded.model_parts)
          .push_back(std::move(p));
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
