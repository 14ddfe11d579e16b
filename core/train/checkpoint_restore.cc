// Checkpoint tensors -> parameters and optimizer state, checked by name and
// shape.
#include "core/train/checkpoint_restore.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace lockstep {

absl::Status ApplyCheckpointModel(const LoadedCheckpoint& loaded,
                                  const std::vector<Param*>& params,
                                  const std::string& hint) {
  const std::string where = absl::StrCat("checkpoint ", loaded.path);
  if (loaded.model.size() != params.size()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s holds %d model tensors but the model has %d parameters; it is "
        "another model%s",
        where, loaded.model.size(), params.size(), hint));
  }
  for (const auto& [name, tensor] : loaded.model) {
    Param* p = nullptr;
    for (Param* q : params) {
      if (q->name == name) p = q;
    }
    if (p == nullptr || p->value.shape() != tensor.shape()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: tensor %s %s does not match the model (%s); it is another "
          "model%s",
          where, name, ShapeToString(tensor.shape()),
          p ? ShapeToString(p->value.shape()) : "no such parameter", hint));
    }
    p->value = tensor;
  }
  return absl::OkStatus();
}

absl::Status ApplyCheckpoint(const LoadedCheckpoint& loaded,
                             const std::vector<Param*>& params,
                             Optimizer& optimizer,
                             std::vector<std::string>* fresh) {
  RETURN_IF_ERROR(ApplyCheckpointModel(loaded, params,
                                       " (use a new job name or --no-resume)"));
  const std::string where = absl::StrCat("checkpoint ", loaded.path);
  std::map<std::string, const Tensor*> saved;
  for (const auto& [n, t] : loaded.optimizer) saved[n] = &t;
  // State names end with the parameter's name ("adam/m/dense/kernel").
  auto param_of = [&](const std::string& state) {
    for (const Param* p : params) {
      if (state.size() > p->name.size() &&
          state.compare(state.size() - p->name.size(), p->name.size(),
                        p->name) == 0 &&
          state[state.size() - p->name.size() - 1] == '/') {
        return p->name;
      }
    }
    return state;
  };
  // Whole tensors, or this rank's parts of them (a sharded optimizer).
  const std::vector<StatePiece> states = optimizer.StatePieces();
  std::set<std::string> with_state, without_state;
  for (const StatePiece& piece : states) {
    auto it = saved.find(piece.name);
    if (it != saved.end() && it->second->shape() != piece.shape) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, ": optimizer state ", piece.name, " is ",
                       ShapeToString(it->second->shape()), ", the optimizer's ",
                       ShapeToString(piece.shape)));
    }
    (it == saved.end() ? without_state : with_state)
        .insert(param_of(piece.name));
  }
  for (const std::string& p : with_state) {
    if (without_state.count(p) > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          where, ": the optimizer state of ", p,
          " is partly missing (was the optimizer changed?)"));
    }
  }
  if (with_state.empty() && !without_state.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        where, ": optimizer state ", states.front().name,
        " is missing, and so is every other (was the optimizer changed?)"));
  }
  for (const StatePiece& piece : states) {
    auto it = saved.find(piece.name);
    if (it == saved.end()) {
      piece.data->SetZero();
      continue;
    }
    std::memcpy(piece.data->data(), it->second->data() + piece.offset,
                sizeof(float) * piece.data->size());
  }
  if (fresh != nullptr) fresh->assign(without_state.begin(), without_state.end());
  optimizer.set_iterations(loaded.state.optimizer_iterations);
  return absl::OkStatus();
}

std::string FreshStateNote(const std::vector<std::string>& fresh) {
  std::vector<std::string> shown(
      fresh.begin(), fresh.begin() + std::min<size_t>(fresh.size(), 4));
  std::string line = absl::StrCat(
      "optimizer state starts at zero for ", fresh.size(),
      " parameters the checkpoint has none for (frozen when it was "
      "written?): ",
      absl::StrJoin(shown, ", "));
  if (fresh.size() > shown.size()) {
    absl::StrAppend(&line, " and ", fresh.size() - shown.size(), " more");
  }
  return line;
}

}  // namespace lockstep
