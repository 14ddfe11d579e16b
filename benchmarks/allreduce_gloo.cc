// One rank of the Gloo side of benchmarks/allreduce.sh: times Gloo's ring
// all-reduce (Debian's libgloo-dev, TCP transport on 127.0.0.1), one OS
// process per rank, with the same CLI, sizes, iteration counts and timing
// rule as allreduce_lockstep.cc. Rank 0 prints one
// `RESULT size_bytes iters median_s min_s` line per size.
//
//   allreduce_gloo --rank R --world W --rendezvous DIR [--sizes 4K,1M,...]
//       [--iters N] [--warmup N] [--segment-bytes N] [--timeout-s S]
//       [--deadline-s S]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cli_flags.h"
#include "core/status_macros.h"
#include "gloo/allreduce.h"
#include "gloo/common/error.h"
#include "gloo/config.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"

namespace lockstep {
namespace {

constexpr char kUsage[] =
    "usage: allreduce_gloo --rank R --world W --rendezvous DIR\n"
    "  [--sizes 4K,64K,1M,4M,16M,64M,256M]  bytes of float32 (K/M/G = 2^10..)\n"
    "  [--iters N]          timed iterations per size (default: 1 GiB / size,\n"
    "                       clamped to 10..200)\n"
    "  [--warmup N]         untimed iterations per size first (default 3)\n"
    "  [--segment-bytes N]  Gloo's max segment (pipelining unit; default\n"
    "                       its own, 1 MiB)\n"
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
  int64_t segment_bytes = 0;  // 0: Gloo's default
  int64_t timeout_s = 120;
  int64_t deadline_s = 1200;
};

// The one adapter from Gloo's exceptions to absl::Status: a timeout says
// so, other I/O failures are Unavailable.
absl::Status GlooCall(const std::string& what,
                      const std::function<void()>& fn) {
  try {
    fn();
    return absl::OkStatus();
  } catch (const gloo::IoException& e) {
    const std::string msg = absl::StrCat(what, ": ", e.what());
    const std::string lower = absl::AsciiStrToLower(e.what());
    if (absl::StrContains(lower, "timed out") ||
        absl::StrContains(lower, "timeout")) {
      return absl::DeadlineExceededError(msg);
    }
    return absl::UnavailableError(msg);
  } catch (const gloo::Exception& e) {
    return absl::InternalError(absl::StrCat(what, ": ", e.what()));
  } catch (const std::exception& e) {
    return absl::UnknownError(absl::StrCat(what, ": ", e.what()));
  }
}

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
                  "segment-bytes", "timeout-s", "deadline-s"},
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
  ASSIGN_OR_RETURN(b.segment_bytes, f.GetInt("segment-bytes", 0));
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
  if (b.iters < 0 || b.warmup < 1 || b.segment_bytes < 0 ||
      b.segment_bytes % sizeof(float) != 0 || b.timeout_s < 1 ||
      b.deadline_s < 1) {
    return absl::InvalidArgumentError(
        "need --iters >= 0 (0: by size), --warmup >= 1, --segment-bytes a "
        "multiple of 4 (0: Gloo's default), --timeout-s >= 1, "
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

// The same rule as allreduce_lockstep.cc, so both sides run the same count.
int64_t ItersFor(int64_t bytes, int64_t flag) {
  if (flag > 0) return flag;
  return std::clamp<int64_t>((int64_t{1} << 30) / bytes, 10, 200);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

class Bench {
 public:
  Bench(const BenchFlags& b, std::shared_ptr<gloo::Context> context)
      : b_(b), context_(std::move(context)) {}

  // In place, Gloo's ring algorithm, float sum. Throws gloo::Exception.
  void AllReduce(float* data, int64_t count) {
    gloo::AllreduceOptions opts(context_);
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    opts.setOutput(data, static_cast<size_t>(count));
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(
            &gloo::sum<float>));
    opts.setTag(++tag_);
    if (b_.segment_bytes > 0) {
      opts.setMaxSegmentSize(static_cast<size_t>(b_.segment_bytes));
    }
    opts.setTimeout(std::chrono::seconds(b_.timeout_s));
    gloo::allreduce(opts);
  }

  // An all-reduce of one float per rank, each rank contributing its own
  // seconds at its own index: a barrier that also gathers every rank's time.
  // Returns the slowest rank's (a collective is done when all ranks are).
  absl::StatusOr<double> ExchangeSeconds(double mine) {
    std::vector<float> t(b_.world, 0.0f);
    t[b_.rank] = static_cast<float>(mine);
    RETURN_IF_ERROR(GlooCall("while exchanging timings",
                             [&] { AllReduce(t.data(), b_.world); }));
    return static_cast<double>(*std::max_element(t.begin(), t.end()));
  }

  // Times one size: warm-up iterations (the first one checks the sum), then
  // the timed ones. Returns the per-iteration seconds of the slowest rank.
  absl::StatusOr<std::vector<double>> TimeSize(int64_t bytes) {
    const int64_t n = bytes / static_cast<int64_t>(sizeof(float));
    std::vector<float> data(n);
    for (int64_t i = 0; i < n; ++i) data[i] = float(b_.rank + 1 + i % 7);
    const int64_t iters = ItersFor(bytes, b_.iters);
    std::vector<double> seconds;
    for (int64_t it = 0; it < b_.warmup + iters; ++it) {
      const auto t0 = std::chrono::steady_clock::now();
      RETURN_IF_ERROR(GlooCall(
          absl::StrCat("all-reduce of ", bytes, " bytes, iteration ", it),
          [&] { AllReduce(data.data(), n); }));
      const std::chrono::duration<double> dt =
          std::chrono::steady_clock::now() - t0;
      if (it == 0) {
        RETURN_IF_ERROR(Check(data, bytes));
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
  std::shared_ptr<gloo::Context> context_;
  uint32_t tag_ = 0;
};

absl::Status Run(const BenchFlags& b) {
  std::shared_ptr<gloo::Context> context;
  RETURN_IF_ERROR(GlooCall(
      absl::StrCat("rank ", b.rank, " connecting to ", b.world - 1,
                   " peers through the file store in ", b.rendezvous),
      [&] {
        gloo::transport::tcp::attr attr("127.0.0.1");
        attr.ai_family = AF_INET;
        std::shared_ptr<gloo::transport::Device> device =
            gloo::transport::tcp::CreateDevice(attr);
        gloo::rendezvous::FileStore file_store(b.rendezvous);
        gloo::rendezvous::PrefixStore store("allreduce-bench", file_store);
        auto ctx = std::make_shared<gloo::rendezvous::Context>(b.rank, b.world);
        ctx->setTimeout(std::chrono::seconds(b.timeout_s));
        ctx->connectFullMesh(store, device);
        context = std::move(ctx);
      }));
  Bench bench(b, context);
  if (b.rank == 0) {
    std::printf(
        "# gloo ring (tcp, Gloo %d.%d.%d): world %d, segment %s, "
        "warmup %lld\n",
        GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH, b.world,
        b.segment_bytes > 0 ? absl::StrCat(b.segment_bytes, " bytes").c_str()
                            : "default (1 MiB)",
        static_cast<long long>(b.warmup));
    std::fflush(stdout);
  }
  RETURN_IF_ERROR(bench.ExchangeSeconds(0).status());  // everyone is up
  for (int64_t bytes : b.sizes) {
    ASSIGN_OR_RETURN(const std::vector<double> s, bench.TimeSize(bytes));
    if (b.rank == 0) {
      std::printf("RESULT %lld %zu %.9f %.9f\n", static_cast<long long>(bytes),
                  s.size(), Median(s), *std::min_element(s.begin(), s.end()));
      std::fflush(stdout);
    }
  }
  // A last barrier: nobody closes its connections while a peer still sends.
  return bench.ExchangeSeconds(0).status();
}

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) {
  absl::StatusOr<lockstep::BenchFlags> flags =
      lockstep::ParseBenchFlags(argc, argv);
  if (!flags.ok()) {
    std::fprintf(stderr, "allreduce_gloo: %s\n%s",
                 flags.status().ToString().c_str(), lockstep::kUsage);
    return 2;
  }
  const int64_t limit_s = flags->deadline_s;
  std::thread([limit_s, rank = flags->rank] {
    std::this_thread::sleep_for(std::chrono::seconds(limit_s));
    std::fprintf(stderr, "allreduce_gloo rank %d: gave up after %llds\n", rank,
                 static_cast<long long>(limit_s));
    std::_Exit(3);
  }).detach();
  const absl::Status status = lockstep::Run(*flags);
  if (!status.ok()) {
    std::fprintf(stderr, "allreduce_gloo rank %d: %s\n", flags->rank,
                 status.ToString().c_str());
    std::fflush(stderr);
    std::_Exit(1);  // Gloo's loop thread may still run
  }
  return 0;
}
