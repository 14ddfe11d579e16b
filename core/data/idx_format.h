// "format": "mnist_idx": MNIST's IDX image and label files, gzip or raw
// (the reader is core/data/idx_reader.h). A classification format.
#ifndef LOCKSTEP_CORE_DATA_IDX_FORMAT_H_
#define LOCKSTEP_CORE_DATA_IDX_FORMAT_H_

#include <string>

#include "core/data/data_format.h"

namespace lockstep {

struct IdxConfig {
  std::string train_images, train_labels;
  std::string test_images, test_labels;
};

// A DataSpec of this format (the common fields at their defaults).
DataSpec IdxDataSpec(IdxConfig config);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_DATA_IDX_FORMAT_H_
