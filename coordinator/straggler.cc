// The straggler rule (see straggler.h).
#include "coordinator/straggler.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace lockstep {

double RankFigures::RingMsPerMib() const {
  if (ring_bytes < kMinLinkBytes) return -1;
  return ring_seconds * 1e3 / (ring_bytes / (1 << 20));
}

double RankFigures::ComputeMsPerStep() const {
  if (steps < kMinSteps) return -1;
  return compute_seconds * 1e3 / steps;
}

RankFigures FiguresOf(const lockstep::v1::RankTiming& timing,
                      std::string label) {
  RankFigures f;
  f.label = std::move(label);
  f.ring_bytes = timing.ring_bytes();
  f.ring_seconds = timing.ring_seconds();
  f.steps = timing.steps();
  f.compute_seconds = timing.compute_seconds();
  return f;
}

namespace {

// The smallest figure >= 0, or -1 when fewer than two are known.
double Fastest(const std::vector<double>& figures) {
  double best = std::numeric_limits<double>::infinity();
  int known = 0;
  for (double f : figures) {
    if (f < 0) continue;
    ++known;
    best = std::min(best, f);
  }
  return known >= 2 ? best : -1;
}

Straggler SlowLink(const std::vector<RankFigures>& ranks) {
  const int n = static_cast<int>(ranks.size());
  std::vector<double> ms(n);
  for (int r = 0; r < n; ++r) ms[r] = ranks[r].RingMsPerMib();
  const double fastest = Fastest(ms);
  if (fastest < 0) return {};
  std::vector<int> slow;  // link r: from rank r-1 into rank r
  for (int r = 0; r < n; ++r) {
    if (ms[r] >= kSlowLinkFactor * fastest &&
        ms[r] >= fastest + kSlowLinkFloorMs) {
      slow.push_back(r);
    }
  }
  if (slow.empty()) return {};
  auto prev = [n](int r) { return (r - 1 + n) % n; };
  auto describe = [&](int r) {
    return absl::StrFormat("rank %d -> rank %d %.1f ms/MiB", prev(r), r,
                           ms[r]);
  };
  // The rank that is an end of every slow link.
  int common = -1;
  for (int k = 0; k < n && common < 0; ++k) {
    const bool all = std::all_of(slow.begin(), slow.end(), [&](int r) {
      return r == k || prev(r) == k;
    });
    if (all && slow.size() >= 2) common = k;
  }
  // The link into the named rank first, then the one out of it.
  if (common >= 0) {
    std::stable_partition(slow.begin(), slow.end(),
                          [common](int r) { return r == common; });
  }
  std::vector<std::string> links;
  for (int r : slow) links.push_back(describe(r));
  Straggler s;
  s.cause = "link";
  if (common >= 0) {
    s.rank = common;
    s.subject = absl::StrFormat("rank %d", common);
    s.text = absl::StrFormat(
        "rank %d (%s): its ring links are slow (%s, against %.1f ms/MiB on "
        "the fastest link): its host's network holds the job back",
        common, ranks[common].label, absl::StrJoin(links, ", "), fastest);
  } else {
    // One slow link (or several without a common end): either end may be
    // at fault; the receiving rank is the one named in metrics.
    s.rank = slow.front();
    std::vector<std::string> into;
    for (int r : slow) into.push_back(absl::StrFormat("rank %d", r));
    s.subject = absl::StrCat("the link", slow.size() > 1 ? "s" : "",
                             " into ", absl::StrJoin(into, ", "));
    s.text = absl::StrFormat(
        "the ring link%s %s (against %.1f ms/MiB on the fastest link): the "
        "network between %s holds the job back",
        slow.size() > 1 ? "s" : "", absl::StrJoin(links, ", "), fastest,
        slow.size() > 1 ? "those ranks"
                        : absl::StrFormat("rank %d (%s) and rank %d (%s)",
                                          prev(slow.front()),
                                          ranks[prev(slow.front())].label,
                                          slow.front(),
                                          ranks[slow.front()].label));
  }
  return s;
}

Straggler SlowCompute(const std::vector<RankFigures>& ranks) {
  const int n = static_cast<int>(ranks.size());
  std::vector<double> ms(n);
  for (int r = 0; r < n; ++r) ms[r] = ranks[r].ComputeMsPerStep();
  const double fastest = Fastest(ms);
  if (fastest < 0) return {};
  int slowest = -1;
  for (int r = 0; r < n; ++r) {
    if (ms[r] >= kSlowComputeFactor * fastest &&
        ms[r] >= fastest + kSlowComputeFloorMs &&
        (slowest < 0 || ms[r] > ms[slowest])) {
      slowest = r;
    }
  }
  if (slowest < 0) return {};
  Straggler s;
  s.rank = slowest;
  s.cause = "compute";
  s.subject = absl::StrFormat("rank %d", slowest);
  s.text = absl::StrFormat(
      "rank %d (%s): its own work takes %.1f ms a step against %.1f ms on "
      "the fastest rank: every other rank waits for it",
      slowest, ranks[slowest].label, ms[slowest], fastest);
  return s;
}

}  // namespace

Straggler FindStraggler(const std::vector<RankFigures>& ranks) {
  if (ranks.size() < 2) return {};
  Straggler s = SlowLink(ranks);
  if (s.rank >= 0) return s;
  return SlowCompute(ranks);
}

}  // namespace lockstep
