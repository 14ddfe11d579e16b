// In-memory classification datasets: MNIST IDX files (gzip or raw), CSV files
// (label first) and a seeded synthetic task. Everything is loaded at once;
// batching and sharding happen in ShardPlan / BatchPrefetcher.
#ifndef LOCKSTEP_CORE_DATASET_H_
#define LOCKSTEP_CORE_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/job_spec.h"
#include "core/tensor.h"

namespace lockstep {

struct Dataset {
  // Per sample: mnist [rows, cols] (e.g. [28, 28]); csv [num_features];
  // synthetic SyntheticSampleShape() = [8, 8, 1] (core/synthetic_data.h).
  Shape sample_shape;
  int64_t num_samples = 0;
  int64_t num_classes = 0;  // DataSpec::num_classes; labels lie in [0, it)
  // num_samples * NumElements(sample_shape), row-major, already divided by
  // DataSpec::scale.
  std::vector<float> features;
  std::vector<int32_t> labels;  // num_samples
  // Human description: file paths, or "synthetic(seed=1234, n=8192)".
  std::string source;

  const float* sample(int64_t i) const {
    return features.data() + i * NumElements(sample_shape);
  }
};

enum class Split { kTrain, kTest };

// Loads the train or test split described by `spec`. Errors name the
// DataSpec field and the file:
//   kNotFound         a file cannot be opened
//   kInvalidArgument  bad content (magic, sizes, counts, labels, CSV fields)
//   kDataLoss         a corrupt gzip stream or a read error
absl::StatusOr<Dataset> LoadDataset(const DataSpec& spec, Split split);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_DATASET_H_
