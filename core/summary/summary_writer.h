// TensorBoard event files: records of (uint64 length LE, masked CRC32C of the
// length bytes, an Event proto, masked CRC32C of the proto). TensorBoard
// pointed at the folder shows the curves.
#ifndef LOCKSTEP_CORE_SUMMARY_SUMMARY_WRITER_H_
#define LOCKSTEP_CORE_SUMMARY_SUMMARY_WRITER_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace lockstep {

// Appends scalar summaries to one new event file. Thread-safe. Each Add*
// writes its record to the OS at once (TensorBoard sees it live); Flush
// also fsyncs.
class SummaryWriter {
 public:
  // Creates `dir` if needed and a new file
  // events.out.tfevents.<unix secs>.<hostname>.<pid>.<counter> whose first
  // record is file_version "brain.Event:2".
  static absl::StatusOr<std::unique_ptr<SummaryWriter>> Open(
      const std::string& dir);
  ~SummaryWriter();
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  absl::Status AddScalar(const std::string& tag, int64_t step, double value);
  // One event holding every (tag, value) at `step`.
  absl::Status AddScalars(
      int64_t step, const std::vector<std::pair<std::string, double>>& values);
  absl::Status Flush();
  const std::string& path() const { return path_; }

 private:
  SummaryWriter(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  absl::Status WriteRecord(const std::string& data);

  const std::string path_;
  std::mutex mu_;
  int fd_;
};

// The framing of one record around `data` (exposed for tests and tools).
std::string EncodeEventRecord(const std::string& data);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_SUMMARY_SUMMARY_WRITER_H_
