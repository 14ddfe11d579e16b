// TensorBoard event files (ParseEventFile; `lockstep` reads a job's curves
// back from them). Every record carries two CRC32Cs, so mutations of a file
// rarely get past its first record; the input is therefore used twice:
//   - as a whole file: it parses, or is refused with a message;
//   - as the payload of one record framed the way SummaryWriter frames it
//     (EncodeEventRecord): the reader never refuses that framing, so it
//     parses exactly when the payload is an Event proto, and then reports
//     that event's file_version and every simple_value scalar of it.
// When both parse, the file followed by the framed record parses too, to the
// records and scalars of the two in order (records are independent).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/summary/event_file_reader.h"
#include "core/summary/summary_writer.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/tensorboard.pb.h"
#include "tests/fuzz/fuzz_util.h"

namespace lockstep {
namespace {

// Bitwise, so that NaN values compare equal to themselves.
bool SameDouble(double a, double b) { return std::memcmp(&a, &b, 8) == 0; }

bool SameScalar(const ScalarEvent& a, const ScalarEvent& b) {
  return a.step == b.step && a.tag == b.tag && SameDouble(a.value, b.value) &&
         SameDouble(a.wall_time, b.wall_time);
}

bool SameScalars(const std::vector<ScalarEvent>& a,
                 const std::vector<ScalarEvent>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!SameScalar(a[i], b[i])) return false;
  }
  return true;
}

// The input as a whole event file.
absl::StatusOr<EventFile> CheckFile(const std::string& bytes) {
  absl::StatusOr<EventFile> file = ParseEventFile(bytes, "fuzz.tfevents");
  fuzz::CheckRefusal(file.status());
  if (file.ok()) {
    // A record is at least its 16 bytes of framing.
    FUZZ_CHECK(file->records >= 0);
    FUZZ_CHECK(static_cast<uint64_t>(file->records) * 16 <= bytes.size());
  }
  return file;
}

// The input as one record's payload. *sets_version: the payload is an Event
// whose file_version is set (possibly to "").
absl::StatusOr<EventFile> CheckFramed(const std::string& payload,
                                      bool* sets_version) {
  const std::string framed = EncodeEventRecord(payload);
  absl::StatusOr<EventFile> file = ParseEventFile(framed, "fuzz.tfevents");
  fuzz::CheckRefusal(file.status());
  tensorboard::Event event;
  const bool is_event = event.ParseFromString(payload);
  FUZZ_CHECK(file.ok() == is_event);
  *sets_version = is_event && event.has_file_version();
  if (!file.ok()) return file;
  FUZZ_CHECK(file->records == 1);
  FUZZ_CHECK(file->file_version ==
             (event.has_file_version() ? event.file_version() : ""));
  std::vector<ScalarEvent> want;
  if (event.has_summary()) {
    for (const auto& v : event.summary().value()) {
      if (v.has_simple_value()) {
        want.push_back(
            {event.step(), v.tag(), v.simple_value(), event.wall_time()});
      }
    }
  }
  FUZZ_CHECK(SameScalars(file->scalars, want));
  return file;
}

}  // namespace
}  // namespace lockstep

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep;
  // Protobuf logs each string field with invalid UTF-8 it refuses: noise
  // here, where most inputs are refused.
  google::protobuf::LogSilencer quiet;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<EventFile> file = CheckFile(bytes);
  bool framed_sets_version = false;
  const absl::StatusOr<EventFile> framed =
      CheckFramed(bytes, &framed_sets_version);
  if (!file.ok() || !framed.ok()) return 0;

  absl::StatusOr<EventFile> both =
      ParseEventFile(bytes + EncodeEventRecord(bytes), "fuzz.tfevents");
  FUZZ_CHECK(both.ok());
  FUZZ_CHECK(both->records == file->records + 1);
  // The last record that sets a file_version wins.
  FUZZ_CHECK(both->file_version ==
             (framed_sets_version ? framed->file_version : file->file_version));
  std::vector<ScalarEvent> want = file->scalars;
  want.insert(want.end(), framed->scalars.begin(), framed->scalars.end());
  FUZZ_CHECK(SameScalars(both->scalars, want));
  return 0;
}
