// Reader for MNIST's IDX files (images: magic 0x00000803, labels: 0x00000801;
// big-endian header), gzip-compressed or raw.
#ifndef LOCKSTEP_CORE_DATA_IDX_READER_H_
#define LOCKSTEP_CORE_DATA_IDX_READER_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/data/dataset.h"

namespace lockstep {

// Reads an image file and its label file into a Dataset with sample_shape
// [rows, cols], pixels divided by `scale`. `images_field` / `labels_field`
// ("data.train_images") prefix every error message.
absl::StatusOr<Dataset> ReadIdxDataset(const std::string& images_field,
                                       const std::string& images_path,
                                       const std::string& labels_field,
                                       const std::string& labels_path,
                                       int64_t num_classes, double scale);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_DATA_IDX_READER_H_
