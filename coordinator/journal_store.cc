// The journal's file store (see journal_store.h).
#include "coordinator/journal_store.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "base/crc32c.h"
#include "base/file_util.h"
#include "base/status_macros.h"

namespace lockstep {
namespace {

constexpr char kMagic[] = "LSJRNL01";
constexpr size_t kMagicSize = 8;

}  // namespace

absl::Status JournalStore::Damaged(const std::string& why) const {
  return absl::DataLossError(absl::StrFormat(
      "the journal %s is damaged (%s); move it aside to start without the "
      "previous jobs (their checkpoints stay in place)",
      Where(), why));
}

FileJournalStore::FileJournalStore(std::string storage_dir)
    : path_(JoinPath(JoinPath(storage_dir, "coordinator"), "journal.pb")) {}

absl::StatusOr<std::optional<lockstep::v1::Journal>> FileJournalStore::Read() {
  absl::StatusOr<std::string> bytes = ReadFile(path_);
  if (absl::IsNotFound(bytes.status())) {
    return std::optional<lockstep::v1::Journal>();
  }
  RETURN_IF_ERROR(bytes.status());
  if (bytes->size() < kMagicSize + 4 ||
      std::memcmp(bytes->data(), kMagic, kMagicSize) != 0) {
    return Damaged("no lockstep journal header");
  }
  uint32_t crc = 0;
  for (int i = 0; i < 4; ++i) {
    crc |= static_cast<uint32_t>(static_cast<uint8_t>((*bytes)[kMagicSize + i]))
           << (8 * i);
  }
  const std::string payload = bytes->substr(kMagicSize + 4);
  if (Crc32c(payload.data(), payload.size()) != crc) {
    return Damaged("CRC mismatch");
  }
  lockstep::v1::Journal j;
  if (!j.ParseFromString(payload)) return Damaged("unparsable payload");
  return std::optional<lockstep::v1::Journal>(std::move(j));
}

absl::Status FileJournalStore::Write(const lockstep::v1::Journal& journal) {
  std::string payload;
  journal.SerializeToString(&payload);
  const uint32_t crc = Crc32c(payload.data(), payload.size());
  std::string bytes(kMagic, kMagicSize);
  char c[4];
  for (int i = 0; i < 4; ++i) c[i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  bytes.append(c, 4);
  bytes += payload;
  RETURN_IF_ERROR(MakeDirs(Dirname(path_)));
  return WriteFileAtomic(path_, bytes);
}

}  // namespace lockstep
