// Tests of RingReduceScatter and RingAllGather (sharded optimizer state):
// each rank's owned segment after the reduce-scatter is bitwise the
// all-reduce's, on the float32 and bfloat16 wires, for world sizes 1-5 and
// counts below, at and above the world; the all-gather hands every rank
// every owner's segment; the two halves together are the all-reduce; the
// pass of the owned segments gives each rank its previous rank's, bitwise,
// and leaves the rest of its buffer alone.
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "core/collective/in_process_transport.h"
#include "core/collective/ring_allreduce.h"
#include "core/collective/ring_allreduce_test_util.h"
#include "core/collective/transport.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using testing::Buffers;
using testing::MakeInputs;
using testing::RunRanks;

std::vector<int> AllRanks(int world) {
  std::vector<int> r(world);
  for (int i = 0; i < world; ++i) r[i] = i;
  return r;
}

bool SameBits(const float* a, const float* b, int64_t n) {
  return n == 0 || std::memcmp(a, b, sizeof(float) * n) == 0;
}

class RingHalvesTest
    : public ::testing::TestWithParam<std::tuple<int, int64_t, bool>> {};

TEST_P(RingHalvesTest, OwnedSegmentsAreTheAllReducesAndGatherCompletesIt) {
  const auto [world, count, bf16] = GetParam();
  RingOptions options;
  options.chunk_elements = 1000;  // several chunks per segment
  options.wire = bf16 ? WireType::kBfloat16 : WireType::kFloat32;
  const Buffers inputs = MakeInputs(world, count, /*salt=*/7);
  auto ring = InProcessRing::Create(world);

  Buffers reduced = inputs;
  for (const absl::Status& s :
       RunRanks(*ring, AllRanks(world), reduced, CollectiveTag{1, 1, 0, 0},
                options, &RingAllReduce)) {
    ASSERT_TRUE(s.ok()) << s;
  }
  Buffers sharded = inputs;
  for (const absl::Status& s :
       RunRanks(*ring, AllRanks(world), sharded, CollectiveTag{1, 2, 0, 0},
                options, &RingReduceScatter)) {
    ASSERT_TRUE(s.ok()) << s;
  }
  std::vector<bool> owned(world, false);
  for (int r = 0; r < world; ++r) {
    const int seg = RingOwnedSegment(r, world);
    EXPECT_EQ(seg, (r + 1) % world);
    EXPECT_FALSE(owned[seg]) << "segment " << seg << " owned twice";
    owned[seg] = true;
    const RingSegment s = RingSegmentBounds(count, world, seg);
    EXPECT_TRUE(SameBits(sharded[r].data() + s.begin,
                         reduced[r].data() + s.begin, s.size))
        << "rank " << r << " segment " << seg;
  }
  // Each owner passes its segment to the next rank (float32, whatever the
  // gradients' wire: the copy keeps the owner's bits); nothing else moves.
  Buffers passed = sharded;
  RingOptions pass = options;
  pass.wire = WireType::kFloat32;
  for (const absl::Status& s :
       RunRanks(*ring, AllRanks(world), passed, CollectiveTag{1, 4, 0, 0}, pass,
                &RingPassOwned)) {
    ASSERT_TRUE(s.ok()) << s;
  }
  for (int r = 0; r < world; ++r) {
    const int prev = (r + world - 1) % world;
    const RingSegment own =
        RingSegmentBounds(count, world, RingOwnedSegment(r, world));
    const RingSegment got =
        RingSegmentBounds(count, world, RingOwnedSegment(prev, world));
    EXPECT_EQ(got.begin, RingSegmentBounds(count, world, r).begin);
    for (int64_t i = 0; i < count; ++i) {
      const bool copied =
          world > 1 && i >= got.begin && i < got.begin + got.size;
      const float want = copied ? reduced[r][i] : sharded[r][i];
      ASSERT_TRUE(SameBits(&passed[r][i], &want, 1))
          << "rank " << r << " element " << i << (copied ? " (copied)" : "");
    }
    EXPECT_TRUE(SameBits(passed[r].data() + own.begin,
                         reduced[r].data() + own.begin, own.size));
  }
  // The all-gather of what the owners hold (the others' bytes are
  // scrambled first: nothing of them may survive) is the all-reduce.
  for (int r = 0; r < world; ++r) {
    const RingSegment own =
        RingSegmentBounds(count, world, RingOwnedSegment(r, world));
    for (int64_t i = 0; i < count; ++i) {
      if (i < own.begin || i >= own.begin + own.size) sharded[r][i] = -1e30f;
    }
  }
  for (const absl::Status& s :
       RunRanks(*ring, AllRanks(world), sharded, CollectiveTag{1, 3, 0, 0},
                options, &RingAllGather)) {
    ASSERT_TRUE(s.ok()) << s;
  }
  for (int r = 0; r < world; ++r) {
    EXPECT_TRUE(testing::BitwiseEqual(sharded[r], reduced[r])) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Worlds, RingHalvesTest,
    ::testing::Combine(::testing::Values(1, 2, 3, 5),
                       ::testing::Values<int64_t>(0, 2, 4999, 20011),
                       ::testing::Bool()));

TEST(RingHalvesTest, BadArgumentsAreNamed) {
  auto ring = InProcessRing::Create(2);
  float x = 0;
  RingOptions options;
  options.chunk_elements = 0;
  absl::Status s = RingReduceScatter(ring->endpoint(0),
                                     CollectiveTag{1, 1, 0, 0}, &x, 1, options);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "ring reduce-scatter: chunk_elements must be positive, got 0");
  s = RingAllGather(ring->endpoint(0), CollectiveTag{1, 1, 0, 0}, nullptr, 4,
                    RingOptions{});
  EXPECT_EQ(s.message(), "ring all-gather: null data");
}

}  // namespace
}  // namespace lockstep
