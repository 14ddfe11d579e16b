// One rank of the Gloo side of benchmarks/allreduce.sh: times Gloo's ring
// all-reduce (Debian's libgloo-dev, TCP transport on 127.0.0.1), one OS
// process per rank, with the same CLI, sizes, iteration counts and timing
// rule as allreduce_lockstep.cc. Rank 0 prints one
// `RESULT size_bytes iters median_s min_s` line per size.
//
//   allreduce_gloo --rank R --world W --rendezvous DIR [--sizes 4K,1M,...]
//       [--iters N] [--warmup N] [--segment-bytes N] [--timeout-s S]
//       [--deadline-s S]
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "benchmarks/allreduce_harness.h"
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
    "  [--segment-bytes N]  Gloo's max segment (pipelining unit; default\n"
    "                       its own, 1 MiB)\n";

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

absl::Status Run(const BenchFlags& b) {
  ASSIGN_OR_RETURN(const int64_t segment_bytes,
                   b.raw.GetInt("segment-bytes", 0));
  if (segment_bytes < 0 || segment_bytes % sizeof(float) != 0) {
    return absl::InvalidArgumentError(
        "need --segment-bytes a multiple of 4 (0: Gloo's default)");
  }
  std::shared_ptr<gloo::Context> context;
  RETURN_IF_ERROR(GlooCall(
      absl::StrCat("rank ", b.rank, " connecting to ", b.world - 1,
                   " peers through the file store in ", b.rendezvous),
      [&] {
        gloo::transport::tcp::attr attr(b.host.c_str());
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
  uint32_t tag = 0;
  // In place, Gloo's ring algorithm, float sum.
  auto all_reduce = [&](float* data, int64_t count) {
    return GlooCall("gloo::allreduce", [&] {
      gloo::AllreduceOptions opts(context);
      opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      opts.setOutput(data, static_cast<size_t>(count));
      opts.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(
              &gloo::sum<float>));
      opts.setTag(++tag);
      if (segment_bytes > 0) {
        opts.setMaxSegmentSize(static_cast<size_t>(segment_bytes));
      }
      opts.setTimeout(std::chrono::seconds(b.timeout_s));
      gloo::allreduce(opts);
    });
  };
  return RunSizes(
      b,
      absl::StrFormat("# gloo ring (tcp, Gloo %d.%d.%d): world %d, segment "
                      "%s, warmup %d",
                      GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR,
                      GLOO_VERSION_PATCH, b.world,
                      segment_bytes > 0 ? absl::StrCat(segment_bytes, " bytes")
                                        : std::string("default (1 MiB)"),
                      b.warmup),
      all_reduce, all_reduce);
}

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) {
  return lockstep::BenchMain(argc, argv, "allreduce_gloo", lockstep::kUsage,
                             {"segment-bytes"}, lockstep::Run);
}
