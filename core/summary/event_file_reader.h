// Reads a TensorBoard event file back, verifying both CRCs of every record.
// For tests and tools (e.g. printing a job's curves).
#ifndef LOCKSTEP_CORE_SUMMARY_EVENT_FILE_READER_H_
#define LOCKSTEP_CORE_SUMMARY_EVENT_FILE_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace lockstep {

struct ScalarEvent {
  int64_t step = 0;
  std::string tag;
  double value = 0;  // stored as float32 (simple_value)
  double wall_time = 0;
};

struct EventFile {
  std::string file_version;          // "brain.Event:2"
  std::vector<ScalarEvent> scalars;  // in file order
  int64_t records = 0;
};

// DataLoss naming the file and the record's byte offset on a CRC mismatch
// ("length CRC" or "data CRC"), a truncated record or an unparsable Event.
absl::StatusOr<EventFile> ReadEventFile(const std::string& path);
// Same over a file image in memory; `name` is used in errors.
absl::StatusOr<EventFile> ParseEventFile(const std::string& bytes,
                                         const std::string& name);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_SUMMARY_EVENT_FILE_READER_H_
