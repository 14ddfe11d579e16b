// Fetching one of a job's files over JobService.ReadJobFile into a sink,
// verifying every chunk's CRC-32 and the whole file's, and resuming a
// broken or damaged transfer from the last verified byte. The transport
// is a function, so the retry rules are tested without a server.
#ifndef LOCKSTEP_CLIENT_FILE_FETCH_H_
#define LOCKSTEP_CLIENT_FILE_FETCH_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/jobs.pb.h"

namespace lockstep {

// zlib's CRC-32 of data, extending `crc` (0 to start).
uint32_t Crc32(uint32_t crc, absl::string_view data);

// Where a fetched file's bytes go. Not thread-safe.
class FileSink {
 public:
  virtual ~FileSink() = default;
  virtual int64_t size() const = 0;    // bytes held: where a read resumes
  virtual uint32_t crc32() const = 0;  // CRC-32 of those bytes
  virtual absl::Status Append(absl::string_view data) = 0;
  virtual absl::Status Reset() = 0;  // drop every byte (start over)
};

class StringSink : public FileSink {
 public:
  int64_t size() const override { return static_cast<int64_t>(data_.size()); }
  uint32_t crc32() const override { return crc_; }
  absl::Status Append(absl::string_view data) override;
  absl::Status Reset() override;
  const std::string& data() const { return data_; }

 private:
  std::string data_;
  uint32_t crc_ = 0;
};

// Writes to `path`.partial (continuing one an earlier pull left there)
// and renames it to `path` once the whole file checked out (Commit).
class DiskSink : public FileSink {
 public:
  static absl::StatusOr<std::unique_ptr<DiskSink>> Open(std::string path);
  ~DiskSink() override;
  int64_t size() const override { return size_; }
  uint32_t crc32() const override { return crc_; }
  absl::Status Append(absl::string_view data) override;
  absl::Status Reset() override;
  absl::Status Commit();

 private:
  DiskSink(std::string path, FILE* f, int64_t size, uint32_t crc)
      : path_(std::move(path)), f_(f), size_(size), crc_(crc) {}
  std::string path_;
  FILE* f_;
  int64_t size_;
  uint32_t crc_;
};

// One attempt of ReadJobFile from `offset` (`expect_size` as the request's):
// calls `on_chunk` for every chunk received until it returns false, and
// returns the stream's final status (OK when it ended normally).
using ChunkStream = std::function<absl::Status(
    int64_t offset, int64_t expect_size,
    const std::function<bool(const lockstep::v1::FileChunk&)>& on_chunk)>;

struct FetchOptions {
  int max_attempts = 5;
  // Told each time a transfer is resumed or started over, and why:
  // "model.safetensors: the chunk at byte 1048576 failed its CRC-32; reading
  // again from byte 1048576 (attempt 2 of 5)".
  std::function<void(const std::string&)> on_retry;
  // Waits between attempts (tests pass none).
  std::function<void(int attempt)> backoff;
};

// Fills `sink` with the whole of `path` (continuing from what it holds).
// Retries what a network can break or damage (a broken stream, a chunk
// whose CRC-32 does not match, a whole file whose CRC-32 does not match,
// a file that changed meanwhile) up to max_attempts; returns at once what
// no retry can mend (NotFound, InvalidArgument, PermissionDenied,
// Unauthenticated). DataLoss naming the file after the last attempt.
absl::Status FetchFile(const std::string& path, const ChunkStream& stream,
                       FileSink& sink, const FetchOptions& options);

}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_FILE_FETCH_H_
