// TensorBoard event file reader with CRC verification.
#include "core/summary/event_file_reader.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/crc32c.h"
#include "base/file_util.h"
#include "proto/tensorboard.pb.h"

namespace lockstep {
namespace {

uint32_t Le32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

}  // namespace

absl::StatusOr<EventFile> ReadEventFile(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  return ParseEventFile(*bytes, path);
}

absl::StatusOr<EventFile> ParseEventFile(const std::string& bytes,
                                         const std::string& name) {
  EventFile out;
  size_t pos = 0;
  auto corrupt = [&](size_t at, const std::string& what) {
    return absl::DataLossError(absl::StrCat(
        "event file \"", name, "\": record at byte ", at, ": ", what));
  };
  while (pos < bytes.size()) {
    const size_t start = pos;
    if (bytes.size() - pos < 12) return corrupt(start, "truncated header");
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) {
      n |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[pos + i]))
           << (8 * i);
    }
    const uint32_t len_crc = Crc32c(bytes.data() + pos, 8);
    const uint32_t stored_len_crc = UnmaskCrc32c(Le32(bytes.data() + pos + 8));
    if (len_crc != stored_len_crc) {
      return corrupt(start,
                     absl::StrFormat("length CRC mismatch (stored 0x%08x, "
                                     "computed 0x%08x)",
                                     stored_len_crc, len_crc));
    }
    pos += 12;
    if (n > bytes.size() - pos || bytes.size() - pos - n < 4) {
      return corrupt(start, absl::StrCat("truncated (", n,
                                         " data bytes + 4 "
                                         "CRC bytes, ",
                                         bytes.size() - pos, " left)"));
    }
    const char* data = bytes.data() + pos;
    const uint32_t data_crc = Crc32c(data, n);
    const uint32_t stored_data_crc = UnmaskCrc32c(Le32(data + n));
    if (data_crc != stored_data_crc) {
      return corrupt(
          start, absl::StrFormat("data CRC mismatch (stored 0x%08x, computed "
                                 "0x%08x)",
                                 stored_data_crc, data_crc));
    }
    pos += n + 4;
    tensorboard::Event event;
    if (n > static_cast<uint64_t>(INT32_MAX) ||
        !event.ParseFromArray(data, static_cast<int>(n))) {
      return corrupt(start, "not an Event proto");
    }
    ++out.records;
    if (event.has_file_version()) out.file_version = event.file_version();
    if (event.has_summary()) {
      for (const auto& v : event.summary().value()) {
        if (!v.has_simple_value()) continue;
        out.scalars.push_back(
            {event.step(), v.tag(), v.simple_value(), event.wall_time()});
      }
    }
  }
  return out;
}

}  // namespace lockstep
