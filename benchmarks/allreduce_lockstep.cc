// One rank of the lockstep side of benchmarks/allreduce.sh: times lockstep's
// ring all-reduce (core/collective/ring_allreduce.h) over the gRPC ring transport
// (worker/grpc_ring_transport.h), one OS process per rank on 127.0.0.1. Rank 0
// prints one `RESULT size_bytes iters median_s min_s` line per size.
//
//   allreduce_lockstep --rank R --world W --rendezvous DIR
//       [--sizes 4K,1M,...] [--iters N] [--warmup N] [--lanes N]
//       [--chunk-elements N] [--wire float32|bf16]
//       [--tls-cert F --tls-key F --tls-ca F]
//       [--timeout-s S] [--deadline-s S]
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "benchmarks/allreduce_harness.h"
#include "core/collective/ring_allreduce.h"
#include "grpcpp/grpcpp.h"
#include "rpc/rpc_util.h"
#include "rpc/tls.h"
#include "worker/collective_service.h"

namespace lockstep {
namespace {

constexpr char kUsage[] =
    "usage: allreduce_lockstep --rank R --world W --rendezvous DIR\n"
    "  [--lanes N]          gRPC streams to the next rank (default 2)\n"
    "  [--chunk-elements N] floats per ring message (default 1048576)\n"
    "  [--wire float32|bf16] what goes on the wire (default float32; bf16 is\n"
    "                       cluster.compression \"bf16\")\n"
    "  [--checksum on|off]  a checksum on each message (default off; on is\n"
    "                       the job's cluster.ring_checksum true)\n"
    "  [--tls-cert F --tls-key F --tls-ca F]  mutual TLS on the ring, as the\n"
    "                       worker daemon's flags (default: plaintext)\n";

// Publishes our address as DIR/rank-R (written to a temporary, then renamed)
// and waits, bounded, for every rank's. Returns the addresses in rank order.
absl::StatusOr<std::vector<std::string>> ExchangeAddresses(
    const BenchFlags& b, const std::string& address, absl::Duration wait) {
  const auto path = [&](int r) {
    return JoinPath(b.rendezvous, absl::StrCat("rank-", r));
  };
  RETURN_IF_ERROR(WriteFileAtomic(path(b.rank), address));
  const absl::Time give_up = absl::Now() + wait;
  std::vector<std::string> peers(b.world);
  while (true) {
    std::vector<int> missing;
    for (int r = 0; r < b.world; ++r) {
      if (!peers[r].empty()) continue;
      absl::StatusOr<std::string> got = ReadFile(path(r));
      if (got.ok() && !got->empty()) {
        peers[r] = *got;
      } else if (got.ok() || absl::IsNotFound(got.status())) {
        missing.push_back(r);
      } else {
        return got.status();
      }
    }
    if (missing.empty()) return peers;
    if (absl::Now() > give_up) {
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", b.rank, " waited ", absl::FormatDuration(wait),
                       " in ", b.rendezvous, " for the addresses of rank(s) ",
                       absl::StrJoin(missing, ", "),
                       " (files rank-N); did those processes start?"));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
}

absl::Status Run(const BenchFlags& b) {
  ASSIGN_OR_RETURN(const int64_t lanes, b.raw.GetInt("lanes", 2));
  RingOptions ring;
  ASSIGN_OR_RETURN(ring.chunk_elements,
                   b.raw.GetInt("chunk-elements", 1024 * 1024));
  ring.timeout = absl::Seconds(b.timeout_s);
  const std::string wire = b.raw.Get("wire", "float32");
  if (wire == "bf16") {
    ring.wire = WireType::kBfloat16;
  } else if (wire != "float32") {
    return absl::InvalidArgumentError(
        absl::StrCat("--wire: expected float32 or bf16, got \"", wire, "\""));
  }
  const std::string checksum = b.raw.Get("checksum", "off");
  if (checksum != "on" && checksum != "off") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--checksum: expected on or off, got \"", checksum, "\""));
  }
  if (lanes < 1 || lanes > 16 || ring.chunk_elements < 1) {
    return absl::InvalidArgumentError(
        "need --lanes in 1..16 and --chunk-elements >= 1");
  }
  const TlsPaths tls_paths{b.raw.Get("tls-cert", ""), b.raw.Get("tls-key", ""),
                           b.raw.Get("tls-ca", "")};
  ASSIGN_OR_RETURN(const TlsFiles tls,
                   LoadTlsFiles(tls_paths, TlsRole::kDaemon));
  RingOptions exact = ring;
  exact.wire = WireType::kFloat32;
  CollectiveService service(absl::Seconds(b.timeout_s));
  grpc::ServerBuilder builder;
  ConfigureServer(builder);
  int port = 0;
  builder.AddListeningPort(
      absl::StrCat(b.host, ":0"),
      MakeServerCredentials(tls, ClientCertificates::kRequireAndVerify),
      &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("could not listen on ", b.host, ":0"));
  }
  const std::string address = absl::StrCat(b.host, ":", port);
  ASSIGN_OR_RETURN(std::vector<std::string> peers,
                   ExchangeAddresses(b, address, absl::Seconds(b.timeout_s)));

  GrpcRingOptions o;
  o.job = "allreduce-bench";
  o.generation = 1;
  o.rank = b.rank;
  o.peers = peers;
  o.lanes = static_cast<int>(lanes);
  o.tls = tls;
  o.checksum = checksum == "on";
  auto transport = std::make_shared<GrpcRingTransport>(o);
  service.Attach(transport);
  int64_t step = 0;
  // Each collective gets its own step number, so no two ever share a tag.
  const absl::Status status = RunSizes(
      b,
      absl::StrFormat("# lockstep grpc ring: world %d, lanes %d, "
                      "chunk_elements %d, warmup %d, %s, %s on the wire, "
                      "checksum %s",
                      b.world, lanes, ring.chunk_elements, b.warmup,
                      tls.enabled() ? "mutual TLS" : "plaintext",
                      WireTypeName(ring.wire), checksum),
      [&](float* data, int64_t count) {
        return RingAllReduce(*transport, CollectiveTag{1, ++step, 0, 0}, data,
                             count, ring);
      },
      [&](float* data, int64_t count) {  // timings: float32 whatever --wire
        return RingAllReduce(*transport, CollectiveTag{1, ++step, 0, 0}, data,
                             count, exact);
      });
  if (!status.ok()) transport->Abort(status);  // peers fail fast, not at 120 s
  service.Detach(transport.get());
  transport.reset();  // closes our streams
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return status;
}

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) {
  lockstep::KeepMessageBuffersResident();  // as the worker daemon does
  // As the lockstep binary: no Abseil debug deadlock detection.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return lockstep::BenchMain(argc, argv, "allreduce_lockstep", lockstep::kUsage,
                             {"lanes", "chunk-elements", "wire", "checksum", "tls-cert", "tls-key",
                              "tls-ca"}, lockstep::Run);
}
