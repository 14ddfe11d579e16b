// Loading a job's data through its format (core/data/data_format.h): the
// train and test splits, the test split tokenized with the train split's
// vocabulary, or a checkpoint's. Above every format; no reader includes it.
#ifndef LOCKSTEP_CORE_DATA_DATA_LOADER_H_
#define LOCKSTEP_CORE_DATA_DATA_LOADER_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/data/data_format.h"
#include "core/data/dataset.h"

namespace lockstep {

// The split `split` of `data`. InvalidArgument when the spec has no
// format's config; otherwise the format's errors (DataConfig::Load).
absl::StatusOr<Dataset> LoadDataset(const DataSpec& data, Split split,
                                    const DataOptions& options = {});

// A job's train and test splits (the test split with the train split's
// vocabulary); options.restored holds a checkpoint's artifacts when a
// resumed or rejoined job reads the data as the run that wrote it did.
struct JobData {
  Dataset train, test;
};
absl::StatusOr<JobData> LoadJobData(const DataSpec& data, DataOptions options);

// What a checkpoint keeps for the data of `data` loaded as `train`
// (DataConfig::Artifacts; none without a config).
DataArtifacts JobDataArtifacts(const DataSpec& data, const Dataset& train);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_DATA_DATA_LOADER_H_
