// A job's splits through its data format (see data_loader.h).
#include "core/data/data_loader.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace lockstep {

absl::StatusOr<Dataset> LoadDataset(const DataSpec& data, Split split,
                                    const DataOptions& options) {
  if (data.config == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.format: \"", data.format, "\" has no fields read"));
  }
  return data.config->Load(data, split, options);
}

absl::StatusOr<JobData> LoadJobData(const DataSpec& data, DataOptions options) {
  JobData d;
  ASSIGN_OR_RETURN(d.train, LoadDataset(data, Split::kTrain, options));
  options.vocab = d.train.vocab;
  ASSIGN_OR_RETURN(d.test, LoadDataset(data, Split::kTest, options));
  return d;
}

DataArtifacts JobDataArtifacts(const DataSpec& data, const Dataset& train) {
  return data.config != nullptr ? data.config->Artifacts(train)
                                : DataArtifacts();
}

}  // namespace lockstep
