// Which rank holds a running job back (DESIGN "Failure and rejoin": a slow
// rank is not a failed one; it is named, not dropped). Each worker reports
// decaying sums of its ring link's transit and of its own work per step
// (HeartbeatRequest.timing); this compares the ranks of one job:
//
// - link: rank r's figure is the link from rank r-1 into r, in ms per MiB.
//   A link is slow at >= kSlowLinkFactor x the job's fastest link (and
//   >= kSlowLinkFloorMs more). A rank on a slow host is an end of both of
//   its links: when every slow link has one rank in common, that rank is
//   named; one slow link names both its ends; in a world of 2 both links
//   cross both hosts, so a slow host there reads as a slow job, not as a
//   straggler (nothing to compare with).
// - compute: a rank whose own work per step is >= kSlowComputeFactor x the
//   fastest rank's (and >= kSlowComputeFloorMs more).
//
// The link check comes first: a slow link makes every rank wait, and waits
// are not work, so it does not make a rank look slow to compute.
#ifndef LOCKSTEP_COORDINATOR_STRAGGLER_H_
#define LOCKSTEP_COORDINATOR_STRAGGLER_H_

#include <string>
#include <vector>

#include "proto/cluster.pb.h"

namespace lockstep {

inline constexpr double kSlowLinkFactor = 5;
inline constexpr double kSlowLinkFloorMs = 2;  // per MiB
inline constexpr double kSlowComputeFactor = 2;
inline constexpr double kSlowComputeFloorMs = 20;  // per step
// Enough recent data to compare (decayed sums).
inline constexpr double kMinLinkBytes = 1 << 20;
inline constexpr double kMinSteps = 5;

struct RankFigures {
  std::string label;  // "host3 on h3": how the text names the rank's worker
  double ring_bytes = 0;
  double ring_seconds = 0;
  double steps = 0;
  double compute_seconds = 0;

  // -1 when there is too little data.
  double RingMsPerMib() const;
  double ComputeMsPerStep() const;
};

// A worker's heartbeat figures (HeartbeatRequest.timing) under `label`.
RankFigures FiguresOf(const lockstep::v1::RankTiming& timing,
                      std::string label = "");

struct Straggler {
  int rank = -1;          // -1: none
  std::string cause;      // "link" or "compute"
  // Who is named, without figures: "rank 2" (its host's links or its own
  // work) or "the link into rank 2" (one slow link, either end). A job's
  // event is written once per generation, cause and subject, so a verdict
  // that sharpens (one link measured first, then the host) is told again.
  std::string subject;
  std::string text;       // for status, events and the dashboard
};

// `ranks` in rank order (ranks[r] is rank r).
Straggler FindStraggler(const std::vector<RankFigures>& ranks);

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_STRAGGLER_H_
