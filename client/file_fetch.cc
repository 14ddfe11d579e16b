// The fetch loop: verify, append, resume.
#include "client/file_fetch.h"

#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_util.h"

namespace lockstep {

namespace v1 = lockstep::v1;

uint32_t Crc32(uint32_t crc, absl::string_view data) {
  return static_cast<uint32_t>(
      crc32_z(crc, reinterpret_cast<const Bytef*>(data.data()), data.size()));
}

absl::Status StringSink::Append(absl::string_view data) {
  data_.append(data.data(), data.size());
  crc_ = Crc32(crc_, data);
  return absl::OkStatus();
}

absl::Status StringSink::Reset() {
  data_.clear();
  crc_ = 0;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DiskSink>> DiskSink::Open(std::string path) {
  const std::string partial = path + ".partial";
  FILE* f = fopen(partial.c_str(), "r+b");
  if (f == nullptr && errno == ENOENT) f = fopen(partial.c_str(), "w+b");
  if (f == nullptr) return ErrnoToStatus("open", partial, errno);
  // What an earlier pull left: its bytes were verified chunk by chunk, and
  // the whole file's CRC at the end checks them again.
  int64_t size = 0;
  uint32_t crc = 0;
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
    crc = Crc32(crc, absl::string_view(buf, n));
    size += static_cast<int64_t>(n);
  }
  if (ferror(f)) {
    const int err = errno;
    fclose(f);
    return ErrnoToStatus("read", partial, err);
  }
  return std::unique_ptr<DiskSink>(new DiskSink(std::move(path), f, size, crc));
}

DiskSink::~DiskSink() {
  if (f_ != nullptr) fclose(f_);
}

absl::Status DiskSink::Append(absl::string_view data) {
  if (fseeko(f_, size_, SEEK_SET) != 0 ||
      fwrite(data.data(), 1, data.size(), f_) != data.size()) {
    return ErrnoToStatus("write", path_ + ".partial", errno);
  }
  size_ += static_cast<int64_t>(data.size());
  crc_ = Crc32(crc_, data);
  return absl::OkStatus();
}

absl::Status DiskSink::Reset() {
  if (fflush(f_) != 0 || ftruncate(fileno(f_), 0) != 0) {
    return ErrnoToStatus("truncate", path_ + ".partial", errno);
  }
  size_ = 0;
  crc_ = 0;
  return absl::OkStatus();
}

absl::Status DiskSink::Commit() {
  const std::string partial = path_ + ".partial";
  if (fflush(f_) != 0 || fsync(fileno(f_)) != 0) {
    return ErrnoToStatus("write", partial, errno);
  }
  fclose(f_);
  f_ = nullptr;
  if (rename(partial.c_str(), path_.c_str()) != 0) {
    return ErrnoToStatus("rename", partial, errno);
  }
  return absl::OkStatus();
}

absl::Status FetchFile(const std::string& path, const ChunkStream& stream,
                       FileSink& sink, const FetchOptions& options) {
  int64_t expect_size = 0;
  std::string last_problem;
  for (int attempt = 1; attempt <= options.max_attempts; ++attempt) {
    if (attempt > 1 && options.backoff) options.backoff(attempt);
    bool done = false;
    bool start_over = false;
    std::string problem;
    absl::Status appended = absl::OkStatus();
    absl::Status s =
        stream(sink.size(), expect_size, [&](const v1::FileChunk& chunk) {
          if (chunk.offset() != sink.size()) {
            problem = absl::StrFormat("a chunk came for byte %d, expected %d",
                                      chunk.offset(), sink.size());
            return false;
          }
          if (Crc32(0, chunk.data()) != chunk.crc32()) {
            problem = absl::StrFormat(
                "the chunk at byte %d failed its CRC-32 (damaged on the way)",
                chunk.offset());
            return false;
          }
          appended = sink.Append(chunk.data());
          if (!appended.ok()) return false;
          expect_size = chunk.file_size();
          if (chunk.last()) {
            if (sink.size() != chunk.file_size() ||
                sink.crc32() != chunk.file_crc32()) {
              problem = absl::StrFormat(
                  "the whole file (%d bytes) failed its CRC-32", sink.size());
              start_over = true;
            } else {
              done = true;
            }
            return false;
          }
          return true;
        });
    if (!appended.ok()) return appended;  // our own disk: no retry mends it
    if (done) return absl::OkStatus();
    if (problem.empty()) {
      if (s.ok()) {
        problem = "the transfer ended before the file's last chunk";
      } else if (absl::IsFailedPrecondition(s)) {
        problem = std::string(s.message());
        start_over = true;
      } else if (absl::IsNotFound(s) || absl::IsInvalidArgument(s) ||
                 absl::IsPermissionDenied(s) || absl::IsUnauthenticated(s) ||
                 absl::IsUnimplemented(s)) {
        return s;
      } else {
        problem = std::string(s.message());
      }
    }
    if (start_over) {
      if (absl::Status r = sink.Reset(); !r.ok()) return r;
      expect_size = 0;
    }
    last_problem = problem;
    if (attempt < options.max_attempts && options.on_retry) {
      options.on_retry(absl::StrFormat(
          "%s: %s; %s (attempt %d of %d)", path, problem,
          start_over ? "reading it again from the start"
                     : absl::StrCat("reading again from byte ", sink.size()),
          attempt + 1, options.max_attempts));
    }
  }
  return absl::DataLossError(
      absl::StrFormat("%s: not fetched after %d attempts: %s", path,
                      options.max_attempts, last_problem));
}

}  // namespace lockstep
