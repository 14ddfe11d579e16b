// One rank of the lockstep side of benchmarks/allreduce.sh: times lockstep's
// ring all-reduce (core/ring_allreduce.h) over the gRPC ring transport
// (worker/grpc_transport.h), one OS process per rank on 127.0.0.1. Rank 0
// prints one `RESULT size_bytes iters median_s min_s` line per size.
//
//   allreduce_lockstep --rank R --world W --rendezvous DIR
//       [--sizes 4K,1M,...] [--iters N] [--warmup N] [--lanes N]
//       [--chunk-elements N] [--timeout-s S] [--deadline-s S]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cli_flags.h"
#include "core/file_util.h"
#include "core/ring_allreduce.h"
#include "core/status_macros.h"
#include "grpcpp/grpcpp.h"
#include "proto/rpc_util.h"
#include "worker/grpc_transport.h"

namespace lockstep {
namespace {

constexpr char kUsage[] =
    "usage: allreduce_lockstep --rank R --world W --rendezvous DIR\n"
    "  [--sizes 4K,64K,1M,4M,16M,64M,256M]  bytes of float32 (K/M/G = 2^10..)\n"
    "  [--iters N]          timed iterations per size (default: 1 GiB / size,\n"
    "                       clamped to 10..200)\n"
    "  [--warmup N]         untimed iterations per size first (default 3)\n"
    "  [--lanes N]          gRPC streams to the next rank (default 2)\n"
    "  [--chunk-elements N] floats per ring message (default 262144)\n"
    "  [--timeout-s S]      bound on the rendezvous and on each collective\n"
    "                       (default 120)\n"
    "  [--deadline-s S]     the process exits (code 3) after S s in all\n"
    "                       (default 1200)\n";

struct BenchFlags {
  int rank = 0;
  int world = 0;
  std::string rendezvous;
  std::vector<int64_t> sizes;
  int64_t iters = 0;  // 0: chosen per size
  int64_t warmup = 3;
  int lanes = 2;
  int64_t chunk_elements = 256 * 1024;
  int64_t timeout_s = 120;
  int64_t deadline_s = 1200;
};

// "4K" -> 4096, "256M", "1G", or plain bytes; a whole number of float32s.
absl::StatusOr<int64_t> ParseSize(absl::string_view text) {
  absl::string_view digits = text;
  const char suffix = text.empty() ? '\0' : absl::ascii_toupper(text.back());
  const int shift = suffix == 'K'   ? 10
                    : suffix == 'M' ? 20
                    : suffix == 'G' ? 30
                                    : 0;
  if (shift > 0) digits.remove_suffix(1);
  const int64_t unit = int64_t{1} << shift;
  int64_t n = 0;
  if (!absl::SimpleAtoi(digits, &n) || n <= 0 ||
      n > (int64_t{1} << 34) / unit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sizes: \"", text, "\" is not a size like 4096, 64K, 16M or 1G"));
  }
  if (n * unit % sizeof(float) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sizes: ", text, " is not a whole number of float32 values"));
  }
  return n * unit;
}

absl::StatusOr<BenchFlags> ParseBenchFlags(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  ASSIGN_OR_RETURN(
      ParsedFlags f,
      ParseFlags(args,
                 {"rank", "world", "rendezvous", "sizes", "iters", "warmup",
                  "lanes", "chunk-elements", "timeout-s", "deadline-s"},
                 {}));
  if (!f.positional.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument \"", f.positional[0], "\""));
  }
  BenchFlags b;
  ASSIGN_OR_RETURN(const int64_t rank, f.GetInt("rank", -1));
  ASSIGN_OR_RETURN(const int64_t world, f.GetInt("world", 0));
  ASSIGN_OR_RETURN(b.iters, f.GetInt("iters", 0));
  ASSIGN_OR_RETURN(b.warmup, f.GetInt("warmup", 3));
  ASSIGN_OR_RETURN(const int64_t lanes, f.GetInt("lanes", 2));
  ASSIGN_OR_RETURN(b.chunk_elements, f.GetInt("chunk-elements", 256 * 1024));
  ASSIGN_OR_RETURN(b.timeout_s, f.GetInt("timeout-s", 120));
  ASSIGN_OR_RETURN(b.deadline_s, f.GetInt("deadline-s", 1200));
  b.rendezvous = f.Get("rendezvous", "");
  if (world < 1 || world > 64 || rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "need --world in 1..64 and --rank in 0..world-1, got --world ", world,
        " --rank ", rank));
  }
  if (b.rendezvous.empty()) {
    return absl::InvalidArgumentError("--rendezvous DIR is required");
  }
  if (b.iters < 0 || b.warmup < 1 || lanes < 1 || lanes > 16 ||
      b.chunk_elements < 1 || b.timeout_s < 1 || b.deadline_s < 1) {
    return absl::InvalidArgumentError(
        "need --iters >= 0 (0: by size), --warmup >= 1, --lanes in 1..16, "
        "--chunk-elements >= 1, --timeout-s >= 1, --deadline-s >= 1");
  }
  b.rank = static_cast<int>(rank);
  b.world = static_cast<int>(world);
  b.lanes = static_cast<int>(lanes);
  for (absl::string_view s :
       absl::StrSplit(f.Get("sizes", "4K,64K,1M,4M,16M,64M,256M"), ',',
                      absl::SkipEmpty())) {
    ASSIGN_OR_RETURN(const int64_t bytes, ParseSize(s));
    b.sizes.push_back(bytes);
  }
  if (b.sizes.empty()) return absl::InvalidArgumentError("--sizes: empty list");
  return b;
}

// Enough for a stable median of small sizes, few for big ones (the same rule
// as allreduce_gloo.cc, so both sides run the same count).
int64_t ItersFor(int64_t bytes, int64_t flag) {
  if (flag > 0) return flag;
  return std::clamp<int64_t>((int64_t{1} << 30) / bytes, 10, 200);
}

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

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

class Bench {
 public:
  Bench(const BenchFlags& b, GrpcRingTransport& transport)
      : b_(b), transport_(transport) {
    options_.chunk_elements = b.chunk_elements;
    options_.timeout = absl::Seconds(b.timeout_s);
  }

  // Each collective gets its own step number, so no two ever share a tag.
  absl::Status AllReduce(float* data, int64_t count) {
    CollectiveTag tag;
    tag.generation = 1;
    tag.step = ++step_;
    return RingAllReduce(transport_, tag, data, count, options_);
  }

  // An all-reduce of one float per rank, each rank contributing its own
  // seconds at its own index: a barrier that also gathers every rank's time.
  // Returns the slowest rank's (a collective is done when all ranks are).
  absl::StatusOr<double> ExchangeSeconds(double mine) {
    std::vector<float> t(b_.world, 0.0f);
    t[b_.rank] = static_cast<float>(mine);
    RETURN_IF_ERROR(AnnotateStatus(AllReduce(t.data(), b_.world),
                                   "while exchanging timings"));
    return static_cast<double>(*std::max_element(t.begin(), t.end()));
  }

  // Times one size: warm-up iterations (the first one checks the sum), then
  // the timed ones. Returns the per-iteration seconds of the slowest rank.
  absl::StatusOr<std::vector<double>> TimeSize(int64_t bytes) {
    const int64_t n = bytes / static_cast<int64_t>(sizeof(float));
    std::vector<float> data(n);
    // Small integers: exact in float whatever the summation order.
    for (int64_t i = 0; i < n; ++i) data[i] = float(b_.rank + 1 + i % 7);
    const int64_t iters = ItersFor(bytes, b_.iters);
    std::vector<double> seconds;
    for (int64_t it = 0; it < b_.warmup + iters; ++it) {
      const auto t0 = std::chrono::steady_clock::now();
      RETURN_IF_ERROR(AnnotateStatus(
          AllReduce(data.data(), n),
          absl::StrCat("all-reduce of ", bytes, " bytes, iteration ", it)));
      const std::chrono::duration<double> dt =
          std::chrono::steady_clock::now() - t0;
      if (it == 0) {
        RETURN_IF_ERROR(Check(data, bytes));
        // Zeros from now on: the sums stay finite however many iterations.
        std::fill(data.begin(), data.end(), 0.0f);
      }
      ASSIGN_OR_RETURN(const double slowest, ExchangeSeconds(dt.count()));
      if (it >= b_.warmup) seconds.push_back(slowest);
    }
    return seconds;
  }

 private:
  absl::Status Check(const std::vector<float>& data, int64_t bytes) const {
    const int64_t w = b_.world;
    for (size_t i = 0; i < data.size(); ++i) {
      const float want = float(w * (w + 1) / 2 + w * int64_t(i % 7));
      if (data[i] != want) {
        return absl::InternalError(absl::StrCat("wrong sum at element ", i,
                                                " of ", bytes, " bytes: got ",
                                                data[i], ", want ", want));
      }
    }
    return absl::OkStatus();
  }

  const BenchFlags& b_;
  GrpcRingTransport& transport_;
  RingOptions options_;
  int64_t step_ = 0;
};

absl::Status Run(const BenchFlags& b) {
  CollectiveService service(absl::Seconds(b.timeout_s));
  grpc::ServerBuilder builder;
  ConfigureServer(builder);
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError("could not listen on 127.0.0.1:0");
  }
  const std::string address = absl::StrCat("127.0.0.1:", port);
  ASSIGN_OR_RETURN(std::vector<std::string> peers,
                   ExchangeAddresses(b, address, absl::Seconds(b.timeout_s)));

  GrpcRingOptions o;
  o.job = "allreduce-bench";
  o.generation = 1;
  o.rank = b.rank;
  o.peers = peers;
  o.lanes = b.lanes;
  auto transport = std::make_shared<GrpcRingTransport>(o);
  service.Attach(transport);

  absl::Status status = [&]() -> absl::Status {
    Bench bench(b, *transport);
    if (b.rank == 0) {
      std::printf(
          "# lockstep grpc ring: world %d, lanes %d, chunk_elements "
          "%lld, warmup %lld\n",
          b.world, b.lanes, static_cast<long long>(b.chunk_elements),
          static_cast<long long>(b.warmup));
      std::fflush(stdout);
    }
    RETURN_IF_ERROR(bench.ExchangeSeconds(0).status());  // everyone is up
    for (int64_t bytes : b.sizes) {
      ASSIGN_OR_RETURN(const std::vector<double> s, bench.TimeSize(bytes));
      if (b.rank == 0) {
        std::printf("RESULT %lld %zu %.9f %.9f\n",
                    static_cast<long long>(bytes), s.size(), Median(s),
                    *std::min_element(s.begin(), s.end()));
        std::fflush(stdout);
      }
    }
    // A last barrier: nobody closes its server while a peer still sends.
    return bench.ExchangeSeconds(0).status();
  }();
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
  absl::StatusOr<lockstep::BenchFlags> flags =
      lockstep::ParseBenchFlags(argc, argv);
  if (!flags.ok()) {
    std::fprintf(stderr, "allreduce_lockstep: %s\n%s",
                 flags.status().ToString().c_str(), lockstep::kUsage);
    return 2;
  }
  // Every wait inside is bounded; this bounds the whole process too, in case
  // a shutdown path hangs.
  const int64_t limit_s = flags->deadline_s;
  std::thread([limit_s, rank = flags->rank] {
    std::this_thread::sleep_for(std::chrono::seconds(limit_s));
    std::fprintf(stderr, "allreduce_lockstep rank %d: gave up after %llds\n",
                 rank, static_cast<long long>(limit_s));
    std::_Exit(3);
  }).detach();
  const absl::Status status = lockstep::Run(*flags);
  if (!status.ok()) {
    std::fprintf(stderr, "allreduce_lockstep rank %d: %s\n", flags->rank,
                 status.ToString().c_str());
    std::fflush(stderr);
    std::_Exit(1);  // skip static destructors while gRPC threads may run
  }
  return 0;
}
