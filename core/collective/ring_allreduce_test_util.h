// What the RingAllReduce and GatherSum tests share: N ranks as threads over
// InProcessRing, inputs whose bits depend on the summation order, and the
// serial sum in the documented ring order to check results bitwise against.
#ifndef LOCKSTEP_CORE_COLLECTIVE_RING_ALLREDUCE_TEST_UTIL_H_
#define LOCKSTEP_CORE_COLLECTIVE_RING_ALLREDUCE_TEST_UTIL_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "core/collective/in_process_transport.h"
#include "core/collective/ring_allreduce.h"
#include "core/collective/transport.h"

namespace lockstep {
namespace testing {

using Buffers = std::vector<std::vector<float>>;

// Pseudo-random floats (splitmix64) spread over 16 binades, so that a
// different summation order gives different bits.
std::vector<float> RankInput(int rank, int64_t count, uint64_t salt = 0);

// RankInput(r, count, salt) for every rank r of `world`.
Buffers MakeInputs(int world, int64_t count, uint64_t salt = 0);

// The header's segment layout, written out independently of the library.
RingSegment DocumentedSegment(int64_t count, int world, int s);

// `x` itself: the float32 wire.
float Unrounded(float x);

// Segment s summed serially as ((x_s + x_{s+1}) + ...) over the ring, each
// partial sum passed through `wire` when it is sent (and the finished sum
// once more): Unrounded for float32, RoundToBf16 for bfloat16.
std::vector<float> RingOrderSum(const Buffers& inputs,
                                float (*wire)(float) = &Unrounded);

// Same size and the same bits.
bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b);

// RingAllReduce or GatherSum.
using Collective = absl::Status (*)(Transport&, const CollectiveTag&, float*,
                                    int64_t, const RingOptions&);

// Runs `collective` (RingAllReduce or GatherSum) on buffers[r] for every r
// in `ranks`, one thread each. Returns one status per rank of the ring (OK
// for ranks that did not run).
std::vector<absl::Status> RunRanks(InProcessRing& ring,
                                   const std::vector<int>& ranks,
                                   Buffers& buffers, const CollectiveTag& tag,
                                   const RingOptions& options,
                                   Collective collective = &RingAllReduce);

// RunRanks with RingAllReduce on every rank of the ring.
std::vector<absl::Status> RunAll(InProcessRing& ring, Buffers& buffers,
                                 const CollectiveTag& tag,
                                 const RingOptions& options = {});

}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_COLLECTIVE_RING_ALLREDUCE_TEST_UTIL_H_
