// Reading a data file whole, gzip or raw, with errors that name the job
// field and the file: what the IDX and CSV readers share.
#ifndef LOCKSTEP_CORE_DATA_DATA_FILE_H_
#define LOCKSTEP_CORE_DATA_DATA_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace lockstep {

// The most a gzip-compressed data file may inflate to: 4 GiB, 8x the largest
// MNIST-family set (EMNIST, 0.55 GB) yet far below what a gzip bomb (a few
// MB that inflate to many GB) claims. A raw file has no such limit: its
// size on disk is the memory it takes.
inline constexpr int64_t kMaxInflatedBytes = int64_t{4} << 30;

// Reads a whole file, inflating it when it starts with the gzip magic 1f 8b
// (concatenated members too). Errors are prefixed with `field`
// ("data.train_images"): kNotFound (no file), kPermissionDenied,
// kInvalidArgument (a corrupt gzip stream, a folder), kDataLoss (a read
// error), kResourceExhausted (it inflates to more than
// `max_inflated_bytes`, found before the output is allocated).
absl::StatusOr<std::string> ReadMaybeGzipFile(
    const std::string& field, const std::string& path,
    int64_t max_inflated_bytes = kMaxInflatedBytes);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_DATA_DATA_FILE_H_
