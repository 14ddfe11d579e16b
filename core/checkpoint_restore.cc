// Checkpoint tensors -> parameters and optimizer state, checked by name and
// shape.
#include "core/checkpoint_restore.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status_macros.h"

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
                             Optimizer& optimizer) {
  RETURN_IF_ERROR(ApplyCheckpointModel(loaded, params,
                                       " (use a new job name or --no-resume)"));
  const std::string where = absl::StrCat("checkpoint ", loaded.path);
  for (auto& [name, dst] : optimizer.StateTensors()) {
    bool found = false;
    for (const auto& [n, t] : loaded.optimizer) {
      if (n == name && t.shape() == dst->shape()) {
        *dst = t;
        found = true;
      }
    }
    if (!found) {
      return absl::FailedPreconditionError(absl::StrCat(
          where, ": optimizer state ", name,
          " is missing or has another shape (was the optimizer changed?)"));
    }
  }
  optimizer.set_iterations(loaded.state.optimizer_iterations);
  return absl::OkStatus();
}

}  // namespace lockstep
