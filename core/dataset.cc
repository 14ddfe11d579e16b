// Dispatch from DataSpec to the IDX, CSV and synthetic readers.
#include "core/dataset.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/csv_reader.h"
#include "core/idx_reader.h"
#include "core/synthetic_data.h"

namespace lockstep {

absl::StatusOr<Dataset> LoadDataset(const DataSpec& spec, Split split) {
  const bool train = split == Split::kTrain;
  if (spec.num_classes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.num_classes: must be > 0, got ", spec.num_classes));
  }
  if (!(spec.scale > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.scale: must be > 0, got ", spec.scale));
  }
  switch (spec.format) {
    case DataFormat::kMnistIdx:
      return train ? ReadIdxDataset("data.train_images", spec.train_images,
                                    "data.train_labels", spec.train_labels,
                                    spec.num_classes, spec.scale)
                   : ReadIdxDataset("data.test_images", spec.test_images,
                                    "data.test_labels", spec.test_labels,
                                    spec.num_classes, spec.scale);
    case DataFormat::kCsv:
      return train
                 ? ReadCsvDataset("data.train_path", spec.train_path,
                                  spec.csv_header, spec.num_classes, spec.scale)
                 : ReadCsvDataset("data.test_path", spec.test_path,
                                  spec.csv_header, spec.num_classes,
                                  spec.scale);
    case DataFormat::kSynthetic:
      return MakeSyntheticDataset(
          spec.synthetic_seed, split,
          train ? spec.synthetic_train : spec.synthetic_test, spec.num_classes,
          spec.scale);
  }
  return absl::InternalError("unknown data.format");
}

}  // namespace lockstep
