// The shared all-reduce benchmark protocol (see allreduce_harness.h).
#include "benchmarks/allreduce_harness.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace lockstep {
namespace {

constexpr char kCommonUsage[] =
    "  [--sizes 4K,64K,1M,4M,16M,64M,256M]  bytes of float32 (K/M/G = 2^10..)\n"
    "  [--iters N]          timed iterations per size (default: 1 GiB / size,\n"
    "                       clamped to 10..200)\n"
    "  [--warmup N]         untimed iterations per size first (default 3)\n"
    "  [--timeout-s S]      bound on the rendezvous and on each collective\n"
    "                       (default 120)\n"
    "  [--deadline-s S]     the process exits (code 3) after S s in all\n"
    "                       (default 1200)\n"
    "  [--host ADDR]        the address this rank listens on and peers dial\n"
    "                       (default 127.0.0.1; a network namespace's own)\n";

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

absl::StatusOr<BenchFlags> ParseBenchFlags(
    int argc, char** argv, const std::set<std::string>& system_flags) {
  std::set<std::string> names = {"rank",      "world",      "rendezvous",
                                 "sizes",     "iters",      "warmup",
                                 "timeout-s", "deadline-s", "host"};
  names.insert(system_flags.begin(), system_flags.end());
  BenchFlags b;
  ASSIGN_OR_RETURN(
      b.raw,
      ParseFlags(std::vector<std::string>(argv + 1, argv + argc), names, {}));
  const ParsedFlags& f = b.raw;
  if (!f.positional.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument \"", f.positional[0], "\""));
  }
  ASSIGN_OR_RETURN(const int64_t rank, f.GetInt("rank", -1));
  ASSIGN_OR_RETURN(const int64_t world, f.GetInt("world", 0));
  ASSIGN_OR_RETURN(b.iters, f.GetInt("iters", 0));
  ASSIGN_OR_RETURN(b.warmup, f.GetInt("warmup", 3));
  ASSIGN_OR_RETURN(b.timeout_s, f.GetInt("timeout-s", 120));
  ASSIGN_OR_RETURN(b.deadline_s, f.GetInt("deadline-s", 1200));
  b.rendezvous = f.Get("rendezvous", "");
  b.host = f.Get("host", "127.0.0.1");
  if (world < 1 || world > 64 || rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "need --world in 1..64 and --rank in 0..world-1, got --world ", world,
        " --rank ", rank));
  }
  if (b.rendezvous.empty()) {
    return absl::InvalidArgumentError("--rendezvous DIR is required");
  }
  if (b.iters < 0 || b.warmup < 1 || b.timeout_s < 1 || b.deadline_s < 1) {
    return absl::InvalidArgumentError(
        "need --iters >= 0 (0: by size), --warmup >= 1, --timeout-s >= 1, "
        "--deadline-s >= 1");
  }
  b.rank = static_cast<int>(rank);
  b.world = static_cast<int>(world);
  for (absl::string_view s :
       absl::StrSplit(f.Get("sizes", "4K,64K,1M,4M,16M,64M,256M"), ',',
                      absl::SkipEmpty())) {
    ASSIGN_OR_RETURN(const int64_t bytes, ParseSize(s));
    b.sizes.push_back(bytes);
  }
  if (b.sizes.empty()) return absl::InvalidArgumentError("--sizes: empty list");
  return b;
}

// Enough for a stable median of small sizes, few for big ones.
int64_t ItersFor(int64_t bytes, int64_t flag) {
  if (flag > 0) return flag;
  return std::clamp<int64_t>((int64_t{1} << 30) / bytes, 10, 200);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// A one-float-per-rank all-reduce, each rank contributing its own seconds
// at its own index: a barrier that also gathers every rank's time. Returns
// the slowest rank's (a collective is done when all ranks are).
absl::StatusOr<double> ExchangeSeconds(const BenchFlags& b,
                                       const AllReduceFn& all_reduce,
                                       double mine) {
  std::vector<float> t(b.world, 0.0f);
  t[b.rank] = static_cast<float>(mine);
  RETURN_IF_ERROR(AnnotateStatus(all_reduce(t.data(), b.world),
                                 "while exchanging timings"));
  return static_cast<double>(*std::max_element(t.begin(), t.end()));
}

// Small integers: exact in float whatever the summation order.
absl::Status CheckSum(const BenchFlags& b, const std::vector<float>& data,
                      int64_t bytes) {
  const int64_t w = b.world;
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

// Warm-up iterations (the first one checks the sum), then the timed ones.
// Returns the per-iteration seconds of the slowest rank.
absl::StatusOr<std::vector<double>> TimeSize(const BenchFlags& b,
                                             const AllReduceFn& all_reduce,
                                             const AllReduceFn& exchange,
                                             int64_t bytes) {
  const int64_t n = bytes / static_cast<int64_t>(sizeof(float));
  std::vector<float> data(n);
  for (int64_t i = 0; i < n; ++i) data[i] = float(b.rank + 1 + i % 7);
  const int64_t iters = ItersFor(bytes, b.iters);
  std::vector<double> seconds;
  for (int64_t it = 0; it < b.warmup + iters; ++it) {
    const auto t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(AnnotateStatus(
        all_reduce(data.data(), n),
        absl::StrCat("all-reduce of ", bytes, " bytes, iteration ", it)));
    const std::chrono::duration<double> dt =
        std::chrono::steady_clock::now() - t0;
    if (it == 0) {
      RETURN_IF_ERROR(CheckSum(b, data, bytes));
      // Zeros from now on: the sums stay finite however many iterations.
      std::fill(data.begin(), data.end(), 0.0f);
    }
    ASSIGN_OR_RETURN(const double slowest,
                     ExchangeSeconds(b, exchange, dt.count()));
    if (it >= b.warmup) seconds.push_back(slowest);
  }
  return seconds;
}

}  // namespace

absl::Status RunSizes(const BenchFlags& b, const std::string& header,
                      const AllReduceFn& all_reduce,
                      const AllReduceFn& exchange) {
  if (b.rank == 0) {
    std::printf("%s\n", header.c_str());
    std::fflush(stdout);
  }
  // Everyone is up.
  RETURN_IF_ERROR(ExchangeSeconds(b, exchange, 0).status());
  for (int64_t bytes : b.sizes) {
    ASSIGN_OR_RETURN(const std::vector<double> s,
                     TimeSize(b, all_reduce, exchange, bytes));
    if (b.rank == 0) {
      std::printf("RESULT %lld %zu %.9f %.9f\n", static_cast<long long>(bytes),
                  s.size(), Median(s), *std::min_element(s.begin(), s.end()));
      std::fflush(stdout);
    }
  }
  // A last barrier: nobody closes its connections while a peer still sends.
  return ExchangeSeconds(b, exchange, 0).status();
}

int BenchMain(int argc, char** argv, const char* name, const char* usage,
              const std::set<std::string>& system_flags,
              const std::function<absl::Status(const BenchFlags&)>& run) {
  absl::StatusOr<BenchFlags> flags = ParseBenchFlags(argc, argv, system_flags);
  if (!flags.ok()) {
    std::fprintf(stderr, "%s: %s\n%s%s", name,
                 flags.status().ToString().c_str(), usage, kCommonUsage);
    return 2;
  }
  // Every wait inside is bounded; this bounds the whole process too, in case
  // a shutdown path hangs.
  const int64_t limit_s = flags->deadline_s;
  std::thread([name, limit_s, rank = flags->rank] {
    std::this_thread::sleep_for(std::chrono::seconds(limit_s));
    std::fprintf(stderr, "%s rank %d: gave up after %llds\n", name, rank,
                 static_cast<long long>(limit_s));
    std::_Exit(3);
  }).detach();
  const absl::Status status = run(*flags);
  if (!status.ok()) {
    std::fprintf(stderr, "%s rank %d: %s\n", name, flags->rank,
                 status.ToString().c_str());
    std::fflush(stderr);
    std::_Exit(1);  // skip static destructors while transport threads run
  }
  return 0;
}

}  // namespace lockstep
