// What a worker (or anything that reaches the coordinator's port: worker
// calls need no credential unless client certificates are required) sends
// the coordinator: Register, Heartbeat, ReportProgress, Finish and
// PublishNcclId, as the Coordinator's handlers take them after gRPC has
// parsed the message. Every input starts from the same state: a fresh
// Coordinator (no journal) over a scratch storage folder, running job "j"
// on two workers ("w1" rank 0, "w2" rank 1, generation 1). Every call
// returns OK or a refusal with a message, never crashes, and the job stays
// readable (Get, List) with a known state. The message decoding itself is
// generated protobuf code plus the job JSON (job_spec_fuzzer); this target
// is for the checks the handlers make on the decoded fields.
//
// Input: records, each a kind byte (taken modulo 5: Register, Heartbeat,
// ProgressReport, FinishRequest, NcclIdRequest to PublishNcclId), a varint32
// length and that many bytes of that message. A record that runs past the
// end or does not parse ends the input.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/coordinator.h"
#include "coordinator/coordinator_test_util.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/cluster.pb.h"
#include "proto/jobs.pb.h"
#include "rpc/rpc_util.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

// Invalid UTF-8 in a string field fails the parse, and protobuf logs each
// such failure: the lines would bury libFuzzer's report. Set before the
// first input, in libFuzzer and in the replay alike.
const bool kQuietProtobuf = [] {
  google::protobuf::SetLogHandler(nullptr);
  return true;
}();

// Bounds one input's work.
constexpr int kMaxRecords = 64;

enum Kind { kRegister, kHeartbeat, kProgress, kFinish, kPublishNcclId, kKinds };

// Parses the next `length`-byte message of `in` into *m.
template <typename Message>
bool ReadMessage(google::protobuf::io::CodedInputStream& in, uint32_t length,
                 Message* m) {
  const auto limit = in.PushLimit(static_cast<int>(length));
  const bool parsed =
      m->ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
  in.PopLimit(limit);
  return parsed;
}

// The job is there and in a state the coordinator knows.
void CheckJobReadable(const lockstep::Coordinator& c) {
  absl::StatusOr<lockstep::v1::JobStatus> job = c.views().Get("j");
  FUZZ_CHECK(job.ok());
  FUZZ_CHECK(lockstep::v1::JobState_IsValid(job->state()));
  FUZZ_CHECK(c.views().List().jobs_size() == 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep;
  const std::string dir = fuzz::ScratchDir() + "/fuzz_" +
                          std::to_string(static_cast<long>(getpid())) +
                          "_coordinator";
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  CoordinatorOptions options;
  options.storage_dir = dir;
  options.journal = false;
  Coordinator c(options);

  // The fixed start: "j" running on w1 (rank 0) and w2 (rank 1).
  FUZZ_CHECK(c.submissions().Submit(testing::kTwoWorkerJob).ok());
  for (const char* host : {"a", "b"}) {
    v1::RegisterRequest r;
    r.set_protocol_version(kProtocolVersion);
    r.set_host(host);
    r.set_pid(100);
    r.set_collective_address(std::string(host) + ":1");
    r.set_replicas(1);
    FUZZ_CHECK(c.registrations().Register(r, "setup").ok());
  }
  for (const char* id : {"w1", "w2"}) {
    v1::HeartbeatRequest h;
    h.set_worker_id(id);
    FUZZ_CHECK(c.registrations().Heartbeat(h).ok());
  }
  {
    absl::StatusOr<v1::JobStatus> job = c.views().Get("j");
    FUZZ_CHECK(job.ok() && job->state() == v1::RUNNING);
  }

  google::protobuf::io::CodedInputStream in(data, static_cast<int>(size));
  for (int records = 0; records < kMaxRecords && in.BytesUntilLimit() > 0;
       ++records) {
    uint8_t kind = 0;
    uint32_t length = 0;
    if (!in.ReadRaw(&kind, 1) || !in.ReadVarint32(&length) ||
        length > static_cast<uint32_t>(in.BytesUntilLimit())) {
      break;
    }
    absl::Status s;
    switch (kind % kKinds) {
      case kRegister: {
        v1::RegisterRequest m;
        if (!ReadMessage(in, length, &m)) return 0;
        s = c.registrations().Register(m, "fuzz").status();
        break;
      }
      case kHeartbeat: {
        v1::HeartbeatRequest m;
        if (!ReadMessage(in, length, &m)) return 0;
        s = c.registrations().Heartbeat(m).status();
        break;
      }
      case kProgress: {
        v1::ProgressReport m;
        if (!ReadMessage(in, length, &m)) return 0;
        s = c.reports().ReportProgress(m).status();
        break;
      }
      case kFinish: {
        v1::FinishRequest m;
        if (!ReadMessage(in, length, &m)) return 0;
        std::string over;
        s = c.reports().Finish(m, &over);
        break;
      }
      case kPublishNcclId: {
        v1::NcclIdRequest m;
        if (!ReadMessage(in, length, &m)) return 0;
        s = c.nccl().PublishNcclId(m);
        break;
      }
    }
    fuzz::CheckRefusal(s);
    CheckJobReadable(c);
  }
  std::filesystem::remove_all(dir, ec);
  return 0;
}
