// Puts a loaded checkpoint's tensors back into a model and its optimizer:
// shared by `lockstep train` and the cluster worker.
#ifndef LOCKSTEP_CORE_TRAIN_CHECKPOINT_RESTORE_H_
#define LOCKSTEP_CORE_TRAIN_CHECKPOINT_RESTORE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/checkpoint/checkpoint.h"
#include "core/tensor.h"
#include "core/train/optimizer.h"

namespace lockstep {

// Matches tensors by name and shape; FailedPrecondition naming the
// checkpoint (loaded.path) and the tensor when they do not fit (another
// model or optimizer). On error the parameters may be partly overwritten:
// callers abandon the model. Sets the optimizer's iteration count.
// Optimizer state the checkpoint has for none of a parameter's slots (a
// layer frozen when it was written, now trainable: the second fine-tuning
// phase) starts at zero, and the parameter is named in *fresh (may be
// null); when the checkpoint has no state for any parameter the optimizer
// keeps state for, the optimizer was changed: an error.
absl::Status ApplyCheckpoint(const LoadedCheckpoint& loaded,
                             const std::vector<Param*>& params,
                             Optimizer& optimizer,
                             std::vector<std::string>* fresh = nullptr);
// The log line for ApplyCheckpoint's *fresh: "optimizer state starts at
// zero for 2 parameters the checkpoint has none for (frozen when it was
// written?): conv/kernel, bn/gamma".
std::string FreshStateNote(const std::vector<std::string>& fresh);

// The model part alone (a model used for inference). `hint` ends the
// FailedPrecondition message.
absl::Status ApplyCheckpointModel(const LoadedCheckpoint& loaded,
                                  const std::vector<Param*>& params,
                                  const std::string& hint);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_TRAIN_CHECKPOINT_RESTORE_H_
