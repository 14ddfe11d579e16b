// "format": "csv": one sample per line, the label first (the reader is
// core/data/csv_reader.h). A classification format.
#ifndef LOCKSTEP_CORE_DATA_CSV_FORMAT_H_
#define LOCKSTEP_CORE_DATA_CSV_FORMAT_H_

#include <string>

#include "core/data/data_format.h"

namespace lockstep {

struct CsvConfig {
  std::string train_path, test_path;
  bool header = false;  // skip each file's first line
};

// A DataSpec of this format (the common fields at their defaults).
DataSpec CsvDataSpec(CsvConfig config);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_DATA_CSV_FORMAT_H_
