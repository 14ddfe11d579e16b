// "format": "synthetic": the built-in, learnable classification task
// (core/data/synthetic_data.h), so a job runs with no files at all.
#ifndef LOCKSTEP_CORE_DATA_SYNTHETIC_FORMAT_H_
#define LOCKSTEP_CORE_DATA_SYNTHETIC_FORMAT_H_

#include <cstdint>

#include "core/data/data_format.h"

namespace lockstep {

struct SyntheticConfig {
  int64_t train_samples = 8192;
  int64_t test_samples = 2048;
  uint64_t seed = 1234;  // the task's, not the job's
};

// A DataSpec of this format (the common fields at their defaults).
DataSpec SyntheticDataSpec(SyntheticConfig config = {});

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_DATA_SYNTHETIC_FORMAT_H_
