// Whole data files, gzip or raw (see data_file.h).
#include "core/data/data_file.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"

namespace lockstep {
namespace {

std::string Quoted(const std::string& path) {
  return absl::StrCat("\"", path, "\"");
}

// Inflates every member of the gzip stream `compressed`, handing the output
// to `sink` 64 KiB at a time. Returns false, having stopped, as soon as
// `sink` does; true at the end of the stream.
absl::StatusOr<bool> Inflate(
    const std::string& field, const std::string& path,
    const std::string& compressed,
    absl::FunctionRef<bool(const char* data, size_t size)> sink) {
  // Malformed input, as a truncated or garbled raw file is.
  auto corrupt = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", Quoted(path), ": corrupt gzip stream: ", what));
  };
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
    return absl::InternalError(absl::StrCat(field, ": inflateInit2 failed"));
  }
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&zs, inflateEnd);
  // zlib counts its input in 32 bits: a file over 4 GiB goes in pieces.
  constexpr size_t kMaxFeed = size_t{1} << 30;
  size_t fed = 0;  // bytes of `compressed` handed to zlib so far
  std::string buf(size_t{1} << 16, '\0');
  while (true) {
    if (zs.avail_in == 0 && fed < compressed.size()) {
      const size_t n = std::min(kMaxFeed, compressed.size() - fed);
      zs.next_in =
          reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data() + fed));
      zs.avail_in = static_cast<uInt>(n);
      fed += n;
    }
    zs.next_out = reinterpret_cast<Bytef*>(buf.data());
    zs.avail_out = static_cast<uInt>(buf.size());
    const int rc = inflate(&zs, Z_NO_FLUSH);
    const size_t produced = buf.size() - zs.avail_out;
    if (produced > 0 && !sink(buf.data(), produced)) return false;
    const size_t next = fed - zs.avail_in;  // the first byte not consumed
    const size_t left = compressed.size() - next;
    if (rc == Z_STREAM_END) {
      if (left == 0) return true;
      // Another gzip member follows (concatenated .gz files are valid).
      if (left >= 2 && static_cast<unsigned char>(compressed[next]) == 0x1f &&
          static_cast<unsigned char>(compressed[next + 1]) == 0x8b) {
        inflateReset(&zs);
        continue;
      }
      return corrupt(
          absl::StrCat(left, " bytes of trailing data after the stream"));
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR) {
      if (left == 0) return corrupt("unexpected end of file");
      continue;
    }
    return corrupt(zs.msg != nullptr ? zs.msg
                                     : absl::StrCat("zlib error ", rc));
  }
}

}  // namespace

absl::StatusOr<std::string> ReadMaybeGzipFile(const std::string& field,
                                              const std::string& path,
                                              int64_t max_inflated_bytes) {
  auto open_error = [&](int err) {
    std::string msg = absl::StrCat(field, ": cannot open ", Quoted(path), ": ",
                                   std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(msg);
    if (err == EACCES) return absl::PermissionDeniedError(msg);
    return absl::FailedPreconditionError(msg);
  };
  auto read_error = [&](int err) {
    if (err == EISDIR) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": ", Quoted(path), " is a folder, not a file"));
    }
    return absl::DataLossError(absl::StrCat(
        field, ": ", Quoted(path), ": read error: ", std::strerror(err)));
  };
  absl::StatusOr<std::string> data = ReadFile(path, open_error, read_error);
  if (!data.ok() || data->size() < 2 ||
      static_cast<unsigned char>((*data)[0]) != 0x1f ||
      static_cast<unsigned char>((*data)[1]) != 0x8b) {
    return data;
  }
  // Inflated twice: counted, then kept. A gzip bomb (a few MB that inflate
  // to many GB) is refused before its output is allocated, and the kept
  // copy is allocated once at its exact size.
  int64_t total = 0;
  absl::StatusOr<bool> whole =
      Inflate(field, path, *data, [&](const char*, size_t n) {
        total += static_cast<int64_t>(n);
        return total <= max_inflated_bytes;
      });
  if (!whole.ok()) return whole.status();
  if (!*whole) {
    return absl::ResourceExhaustedError(absl::StrCat(
        field, ": ", Quoted(path), ": inflates to more than ",
        max_inflated_bytes,
        " bytes, the limit for a gzip-compressed data file (a raw file has "
        "none: decompress it to load it)"));
  }
  std::string out;
  out.reserve(static_cast<size_t>(total));
  whole = Inflate(field, path, *data, [&](const char* p, size_t n) {
    out.append(p, n);
    return true;
  });
  if (!whole.ok()) return whole.status();
  return out;
}

}  // namespace lockstep
