// Whole data files, gzip or raw (see data_file.h).
#include "core/data/data_file.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"

namespace lockstep {
namespace {

std::string Quoted(const std::string& path) {
  return absl::StrCat("\"", path, "\"");
}

absl::StatusOr<std::string> Inflate(const std::string& field,
                                    const std::string& path,
                                    const std::string& compressed) {
  auto corrupt = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat(field, ": ", Quoted(path),
                                            ": corrupt gzip stream: ", what));
  };
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
    return absl::InternalError(absl::StrCat(field, ": inflateInit2 failed"));
  }
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&zs, inflateEnd);
  std::string out;
  out.resize(compressed.size() * 4 + 1024);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  zs.avail_in = static_cast<uInt>(compressed.size());
  size_t produced = 0;
  while (true) {
    if (produced == out.size()) out.resize(out.size() * 2);
    zs.next_out = reinterpret_cast<Bytef*>(&out[produced]);
    zs.avail_out = static_cast<uInt>(out.size() - produced);
    const int rc = inflate(&zs, Z_NO_FLUSH);
    produced = out.size() - zs.avail_out;
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0) break;
      // Another gzip member follows (concatenated .gz files are valid).
      if (zs.avail_in >= 2 && zs.next_in[0] == 0x1f && zs.next_in[1] == 0x8b) {
        inflateReset(&zs);
        continue;
      }
      return corrupt(absl::StrCat(zs.avail_in,
                                  " bytes of trailing data after the stream"));
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR) {
      if (zs.avail_in == 0) return corrupt("unexpected end of file");
      continue;  // output buffer full: grow and go on
    }
    return corrupt(zs.msg != nullptr ? zs.msg
                                     : absl::StrCat("zlib error ", rc));
  }
  out.resize(produced);
  return out;
}

}  // namespace

absl::StatusOr<std::string> ReadMaybeGzipFile(const std::string& field,
                                              const std::string& path) {
  auto open_error = [&](int err) {
    std::string msg = absl::StrCat(field, ": cannot open ", Quoted(path), ": ",
                                   std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(msg);
    if (err == EACCES) return absl::PermissionDeniedError(msg);
    return absl::FailedPreconditionError(msg);
  };
  auto read_error = [&](int err) {
    return absl::DataLossError(absl::StrCat(
        field, ": ", Quoted(path), ": read error: ", std::strerror(err)));
  };
  absl::StatusOr<std::string> data = ReadFile(path, open_error, read_error);
  if (data.ok() && data->size() >= 2 &&
      static_cast<unsigned char>((*data)[0]) == 0x1f &&
      static_cast<unsigned char>((*data)[1]) == 0x8b) {
    return Inflate(field, path, *data);
  }
  return data;
}

}  // namespace lockstep
