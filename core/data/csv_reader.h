// Reader for CSV datasets: one sample per line, "label,f1,f2,...", an
// optional header line, every row the same width.
#ifndef LOCKSTEP_CORE_DATA_CSV_READER_H_
#define LOCKSTEP_CORE_DATA_CSV_READER_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/data/dataset.h"

namespace lockstep {

// sample_shape is [fields - 1]; features divided by `scale`. Blank lines are
// skipped; "\r\n" line ends are accepted. Errors are prefixed with `field`
// ("data.train_path") and name "file":line (1-based) and, for a bad value,
// the 1-based field (the label is field 1).
absl::StatusOr<Dataset> ReadCsvDataset(const std::string& field,
                                       const std::string& path, bool header,
                                       int64_t num_classes, double scale);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_DATA_CSV_READER_H_
