// The coordinator's journal (STORAGE/coordinator/journal.pb): "LSJRNL01",
// the CRC32C of the payload (4 bytes, little-endian) and a serialized
// lockstep.v1.Journal. Its only reader is Coordinator::LoadJournal, which
// checks the framing, parses the proto and validates each job (its job
// spec) while it rebuilds the jobs and workers; there is no smaller
// function that turns the bytes into records, so each input is loaded by a
// fresh Coordinator over a scratch storage folder, twice:
//   - as the payload, framed with the magic and its CRC32C the way
//     WriteJournal frames it (the CRC would otherwise stop nearly every
//     mutation at the framing check);
//   - as the whole file, for the framing checks themselves.
// Checked: the load succeeds or is refused with a message, and ready() says
// which. A load rewrites the journal (with its restart events); a second
// coordinator started on that loads it too, to the same jobs and workers
// (List()). Left out of that comparison: events (each load adds a restart
// line) and heartbeat ages (the clock).
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

#include "absl/status/status.h"
#include "base/crc32c.h"
#include "base/file_util.h"
#include "coordinator/coordinator.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/jobs.pb.h"
#include "tests/fuzz/fuzz_util.h"

namespace lockstep {
namespace {

constexpr char kMagic[] = "LSJRNL01";

// The storage folder of this process's coordinators.
const std::string& StorageDir() {
  static const std::string dir = fuzz::ScratchDir() + "/fuzz_" +
                                 std::to_string(static_cast<long>(getpid())) +
                                 "_journal";
  return dir;
}

// The journal file WriteJournal writes for `payload`.
std::string Frame(const std::string& payload) {
  const uint32_t crc = Crc32c(payload.data(), payload.size());
  std::string out(kMagic, 8);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(crc >> (8 * i)));
  return out + payload;
}

// Byte-exact (NaN included) and independent of map order.
std::string Canonical(const google::protobuf::MessageLite& m) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&coded);
  }
  return out;
}

// The jobs and workers a coordinator restored, less what a reload changes
// by design: events (a restart line more each time) and heartbeat ages.
// A job's own worker list is left out too: its workers are in list.workers,
// and LoadJournal keeps the events and workers of a JobStatus in the file,
// which WriteJournal never writes (only the first load shows them).
std::string Restored(const Coordinator& c) {
  v1::ListJobsResponse list = c.views().List();
  for (v1::JobStatus& job : *list.mutable_jobs()) {
    job.clear_events();
    job.clear_events_total();
    job.clear_workers();
  }
  for (v1::WorkerStatus& w : *list.mutable_workers()) {
    w.clear_heartbeat_age_seconds();
  }
  return Canonical(list);
}

void CheckLoad(const std::string& file) {
  // The job folders (and event files) the previous input's loads made go;
  // the rest of the storage folder stays, since making and removing folders
  // is most of the time a run takes.
  std::error_code ec;
  std::filesystem::remove_all(JoinPath(StorageDir(), "jobs"), ec);
  CoordinatorOptions options;
  options.storage_dir = StorageDir();
  options.journal = true;

  Coordinator first(options);
  const std::string path = first.journal_store().Where();
  FUZZ_CHECK(MakeDirs(Dirname(path)).ok());
  fuzz::OverwriteFile(path, file);
  const absl::Status loaded = first.LoadJournal();
  fuzz::CheckRefusal(loaded);
  FUZZ_CHECK(first.ready() == loaded.ok());
  if (!loaded.ok()) return;

  // Only reads: a journal write costs two fsyncs, which bound the speed of
  // this target.
  options.journal = false;
  Coordinator second(options);
  const absl::Status reloaded = second.LoadJournal();
  if (!reloaded.ok()) {
    std::fprintf(stderr, "the rewritten journal does not load: %s\n",
                 std::string(reloaded.message()).c_str());
  }
  FUZZ_CHECK(reloaded.ok());
  FUZZ_CHECK(Restored(second) == Restored(first));
}

}  // namespace
}  // namespace lockstep

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep;
  // Protobuf logs each string field with invalid UTF-8 it refuses: noise
  // here, where most inputs are refused.
  google::protobuf::LogSilencer quiet;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  CheckLoad(Frame(bytes));
  CheckLoad(bytes);
  return 0;
}
