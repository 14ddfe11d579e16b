// Reading a data file whole, gzip or raw, with errors that name the job
// field and the file: what the IDX and CSV readers share.
#ifndef LOCKSTEP_CORE_DATA_DATA_FILE_H_
#define LOCKSTEP_CORE_DATA_DATA_FILE_H_

#include <string>

#include "absl/status/statusor.h"

namespace lockstep {

// Reads a whole file, inflating it when it starts with the gzip magic 1f 8b
// (concatenated members too). Errors are prefixed with `field`
// ("data.train_images"): kNotFound (no file), kPermissionDenied, kDataLoss
// (a read error or a corrupt stream).
absl::StatusOr<std::string> ReadMaybeGzipFile(const std::string& field,
                                              const std::string& path);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_DATA_DATA_FILE_H_
