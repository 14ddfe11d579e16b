// result.json: the summary of a finished job that `lockstep train` (and the
// coordinator) leave beside its checkpoints.
#ifndef LOCKSTEP_CORE_TRAIN_RESULT_FILE_H_
#define LOCKSTEP_CORE_TRAIN_RESULT_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "core/job/job_spec.h"
#include "core/train/local_training.h"

namespace lockstep {

// The JSON text of result.json (pretty-printed, stable key order).
std::string ResultToJson(const JobSpec& spec, const TrainResult& result);
// Writes it atomically to `path`.
absl::Status WriteResultFile(const std::string& path, const JobSpec& spec,
                             const TrainResult& result);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_TRAIN_RESULT_FILE_H_
