// Slices -> one verified, atomically committed checkpoint.
#include "coordinator/checkpoint_assembler.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_format.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "rpc/checkpoint_wire.h"
#include "rpc/tensor_wire.h"

namespace lockstep {

using lockstep::v1::CheckpointSlice;

absl::StatusOr<CommitInfo> CheckpointAssembler::Add(
    const std::vector<CheckpointSlice>& messages) {
  if (messages.empty()) {
    return absl::InvalidArgumentError("an empty checkpoint slice stream");
  }
  const CheckpointSlice& head = messages.front();
  const std::string what =
      absl::StrFormat("checkpoint slice of rank %d for step %d (generation %d)",
                      head.rank(), head.step(), head.generation());
  if (head.world_size() < 1 || head.rank() < 0 ||
      head.rank() >= head.world_size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: rank %d is not in a world of %d", what,
                        head.rank(), head.world_size()));
  }
  // The counts are a peer's int32s: their sum need not fit an int.
  const int64_t total =
      int64_t{head.model_tensors()} + int64_t{head.optimizer_tensors()};
  absl::MutexLock lock(&mu_);
  if (head.generation() < newest_generation_) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: the job is at generation %d (stale generation)",
                        what, newest_generation_));
  }
  newest_generation_ = head.generation();
  const std::pair<int64_t, int64_t> key{head.generation(), head.step()};
  if (pending_.count(key) == 0 &&
      pending_.size() >= kMaxPendingCheckpointSteps) {
    if (key < pending_.begin()->first) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "%s: %d newer checkpoint steps wait for their other slices (the "
          "oldest is step %d); this older one is not kept",
          what, pending_.size(), pending_.begin()->first.second));
    }
    pending_.erase(pending_.begin());  // a step some rank never completed
  }
  Pending& p = pending_[key];
  if (p.ranks.empty() && p.world_size == 0) {
    p.world_size = head.world_size();
    p.model_tensors = head.model_tensors();
    p.optimizer_tensors = head.optimizer_tensors();
    p.sharded = head.sharded_optimizer();
  }
  if (p.sharded != head.sharded_optimizer()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: its optimizer state is %s but the other slices' is %s", what,
        head.sharded_optimizer() ? "sharded" : "whole",
        p.sharded ? "sharded" : "whole"));
  }
  if (p.world_size != head.world_size() ||
      p.model_tensors != head.model_tensors() ||
      p.optimizer_tensors != head.optimizer_tensors()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: world %d with %d+%d tensors contradicts the other slices (world "
        "%d, %d+%d tensors)",
        what, head.world_size(), head.model_tensors(), head.optimizer_tensors(),
        p.world_size, p.model_tensors, p.optimizer_tensors));
  }
  if (p.ranks.count(head.rank())) {
    return absl::InvalidArgumentError(what + ": this rank already sent it");
  }
  // Verify everything before keeping anything.
  std::vector<std::pair<const lockstep::v1::TensorData*, Tensor>> got;
  int64_t whole = 0;  // tensors (not parts) received
  for (const CheckpointSlice& m : messages) {
    if (!m.has_tensor()) continue;
    absl::StatusOr<Tensor> t = TensorFromWire(m.tensor());
    if (!t.ok()) return AnnotateStatus(t.status(), what);
    const bool part = m.tensor().whole_shape_size() > 0;
    if (part && !(p.sharded && m.tensor().optimizer())) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor %s comes in a part, but only sharded optimizer state "
          "does",
          what, m.tensor().name()));
    }
    if (part) {
      RETURN_IF_ERROR(TensorParts::Check(what, m.tensor().name(),
                                         Shape(m.tensor().whole_shape().begin(),
                                               m.tensor().whole_shape().end()),
                                         m.tensor().offset(), t->size()));
    } else if (p.sharded && m.tensor().optimizer()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: optimizer tensor %s is whole, but the state is sharded (parts "
          "expected)",
          what, m.tensor().name()));
    } else {
      ++whole;
    }
    got.emplace_back(&m.tensor(), *std::move(t));
  }
  // Unsharded: the tensors i % world == rank of model then optimizer
  // state; sharded: of the model tensors (the parts are counted at the
  // commit).
  const int64_t dealt = p.sharded ? int64_t{head.model_tensors()} : total;
  const int64_t expected =
      dealt / head.world_size() + (head.rank() < dealt % head.world_size());
  if (whole != expected) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %d tensors, but rank %d of %d owes %d of the %d", what, whole,
        head.rank(), head.world_size(), expected, dealt));
  }
  if (head.rank() == 0 || p.ranks.empty()) {
    // The job JSON and the data's artifacts ride on rank 0's first message
    // only.
    CheckpointState state = CheckpointStateFromSlice(head);
    if (state.job_json.empty()) state.job_json = p.state.job_json;
    if (state.artifacts.empty()) state.artifacts = p.state.artifacts;
    p.state = std::move(state);
  }
  for (auto& [data, tensor] : got) {
    if (data->whole_shape_size() == 0) {
      auto& into = data->optimizer() ? p.optimizer : p.model;
      into[data->name()] = std::move(tensor);
      continue;
    }
    const Shape shape(data->whole_shape().begin(), data->whole_shape().end());
    absl::Status added = p.parts.Add(what, data->name(), shape, data->offset(),
                                     tensor.data(), tensor.size());
    if (!added.ok()) {
      pending_.erase(key);
      return added;
    }
  }
  p.ranks.insert(head.rank());
  CommitInfo info;
  if (static_cast<int>(p.ranks.size()) < p.world_size) return info;
  if (p.sharded) {
    absl::Status covered = p.parts.CheckCoverage(
        absl::StrFormat("checkpoint step %d", head.step()), "optimizer state");
    if (!covered.ok()) {
      pending_.erase(key);
      return covered;
    }
    for (auto& [name, t] : p.parts.tensors()) p.optimizer[name] = std::move(t);
  }

  // Every slice is here: commit, then forget this and older steps.
  if (static_cast<int>(p.model.size()) != p.model_tensors ||
      static_cast<int>(p.optimizer.size()) != p.optimizer_tensors) {
    // The message reads p, so it is made before p is erased.
    const absl::Status refusal = absl::InvalidArgumentError(absl::StrFormat(
        "checkpoint step %d: %d model and %d optimizer tensors arrived, %d "
        "and %d expected (duplicate names?)",
        head.step(), p.model.size(), p.optimizer.size(), p.model_tensors,
        p.optimizer_tensors));
    pending_.erase(key);
    return refusal;
  }
  NamedTensors model, opt;
  for (auto& [name, t] : p.model) {
    model.emplace_back(name, &t);
    info.bytes += t.size() * sizeof(float);
  }
  for (auto& [name, t] : p.optimizer) {
    opt.emplace_back(name, &t);
    info.bytes += t.size() * sizeof(float);
  }
  const auto t0 = std::chrono::steady_clock::now();
  absl::Status s = store_->Commit(p.state, model, opt);
  info.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  pending_.erase(pending_.begin(), pending_.upper_bound(key));
  RETURN_IF_ERROR(s);
  info.committed = true;
  info.path = JoinPath(store_->dir(), CheckpointFolderName(head.step()));
  return info;
}

}  // namespace lockstep
