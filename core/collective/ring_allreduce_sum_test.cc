// Tests of RingAllReduce's sums: N ranks as threads over InProcessRing,
// results checked bitwise against a serial sum in the documented ring order,
// for every world size and count, small chunks, concurrent buckets and the
// bfloat16 wire.
#include "core/collective/ring_allreduce.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/collective/in_process_transport.h"
#include "core/collective/ring_allreduce_test_util.h"
#include "core/collective/transport.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using testing::BitwiseEqual;
using testing::Buffers;
using testing::DocumentedSegment;
using testing::MakeInputs;
using testing::RingOrderSum;
using testing::RunAll;

enum class CountKind { kZero, kOne, kWorldMinusOne, kUneven, kLarge };

int64_t CountFor(CountKind kind, int world) {
  switch (kind) {
    case CountKind::kZero:
      return 0;
    case CountKind::kOne:
      return 1;
    case CountKind::kWorldMinusOne:
      return world - 1;
    case CountKind::kUneven:
      return 1000003;
    case CountKind::kLarge:
      return 10000000;
  }
  return 0;
}

class RingAllReduceSizesTest
    : public ::testing::TestWithParam<std::tuple<int, CountKind>> {};

TEST_P(RingAllReduceSizesTest, MatchesRingOrderSumBitwiseAndDeterministic) {
  const int world = std::get<0>(GetParam());
  const int64_t count = CountFor(std::get<1>(GetParam()), world);
  const Buffers inputs = MakeInputs(world, count);
  const std::vector<float> expected = RingOrderSum(inputs);
  auto ring = InProcessRing::Create(world);
  std::vector<float> first_run;
  for (int run = 0; run < 2; ++run) {
    Buffers buffers = inputs;
    const CollectiveTag tag{/*generation=*/1, /*step=*/run, /*bucket=*/0};
    const std::vector<absl::Status> statuses = RunAll(*ring, buffers, tag);
    for (int r = 0; r < world; ++r) {
      ASSERT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
      EXPECT_TRUE(BitwiseEqual(buffers[r], expected))
          << "rank " << r << " run " << run;
      EXPECT_TRUE(BitwiseEqual(buffers[r], buffers[0])) << "rank " << r;
    }
    if (run == 0) first_run = buffers[0];
    EXPECT_TRUE(BitwiseEqual(buffers[0], first_run)) << "run " << run;
  }
}

std::string CaseName(
    const ::testing::TestParamInfo<std::tuple<int, CountKind>>& info) {
  static const char* const kNames[] = {"Zero", "One", "WorldMinusOne",
                                       "Uneven1000003", "Large10M"};
  return absl::StrCat("World", std::get<0>(info.param), "_",
                      kNames[static_cast<int>(std::get<1>(info.param))]);
}

INSTANTIATE_TEST_SUITE_P(
    WorldsAndCounts, RingAllReduceSizesTest,
    ::testing::Combine(::testing::Range(1, 6),
                       ::testing::Values(CountKind::kZero, CountKind::kOne,
                                         CountKind::kWorldMinusOne,
                                         CountKind::kUneven,
                                         CountKind::kLarge)),
    CaseName);

TEST(RingAllReduceTest, TagToStringFormat) {
  EXPECT_EQ(TagToString(CollectiveTag{3, 120, 2, 7}),
            "generation 3 step 120 bucket 2 chunk 7");
}

TEST(RingAllReduceTest, SegmentBoundsFollowTheDocumentedLayout) {
  for (int world = 1; world <= 5; ++world) {
    for (int64_t count : {0, 1, 3, 4, 5, 17, 1000003}) {
      int64_t next_begin = 0;
      for (int s = 0; s < world; ++s) {
        const RingSegment got = RingSegmentBounds(count, world, s);
        const RingSegment want = DocumentedSegment(count, world, s);
        EXPECT_EQ(got.begin, want.begin) << count << " " << world << " " << s;
        EXPECT_EQ(got.size, want.size) << count << " " << world << " " << s;
        EXPECT_EQ(got.begin, next_begin);
        next_begin = got.begin + got.size;
      }
      EXPECT_EQ(next_begin, count);
    }
  }
}

// Guards the tests above: with these inputs the order really changes bits.
TEST(RingAllReduceTest, SummationOrderMattersForTheseInputs) {
  const Buffers inputs = MakeInputs(3, 10000);
  std::vector<float> rank_order(10000);
  for (int64_t i = 0; i < 10000; ++i) {
    rank_order[i] = (inputs[0][i] + inputs[1][i]) + inputs[2][i];
  }
  EXPECT_FALSE(BitwiseEqual(rank_order, RingOrderSum(inputs)));
}

TEST(RingAllReduceTest, SmallChunksUnevenCounts) {
  RingOptions options;
  options.chunk_elements = 7;
  for (int world = 2; world <= 5; ++world) {
    auto ring = InProcessRing::Create(world);
    int64_t step = 0;
    for (int64_t count : {1, 6, 7, 8, 13, 50, 1001, 10007}) {
      const Buffers inputs = MakeInputs(world, count, count);
      const std::vector<float> expected = RingOrderSum(inputs);
      Buffers buffers = inputs;
      const std::vector<absl::Status> statuses =
          RunAll(*ring, buffers, CollectiveTag{0, step++, 0}, options);
      for (int r = 0; r < world; ++r) {
        ASSERT_TRUE(statuses[r].ok()) << statuses[r];
        EXPECT_TRUE(BitwiseEqual(buffers[r], expected))
            << "world " << world << " count " << count << " rank " << r;
      }
    }
  }
}

TEST(RingAllReduceTest, LargeSegmentsAreCutIntoAtLeastTwoChunks) {
  constexpr int64_t kMi = 1024 * 1024;
  // The default 4 MiB chunks: world 4, 16 MiB -> 4 MiB segments in 2 chunks.
  EXPECT_EQ(RingChunkElements(kMi, 4 * kMi, 4), kMi / 2);
  // 64 MiB: 16 MiB segments, already 4 chunks of 4 MiB.
  EXPECT_EQ(RingChunkElements(kMi, 16 * kMi, 4), kMi);
  // World 2, 16 MiB: 8 MiB segments, 2 chunks of 4 MiB.
  EXPECT_EQ(RingChunkElements(kMi, 4 * kMi, 2), kMi);
  // Segments up to 2 MiB: never under 1 MiB chunks (256 Ki floats).
  EXPECT_EQ(RingChunkElements(kMi, kMi, 4), 256 * 1024);
  EXPECT_EQ(RingChunkElements(kMi, 1000, 2), 256 * 1024);
  // Odd segments round up: 524,289 floats -> 262,145 per chunk.
  EXPECT_EQ(RingChunkElements(kMi, 4 * 524289, 4), 262145);
  // A chunk at or under 256 Ki floats is the caller's.
  EXPECT_EQ(RingChunkElements(7, 4 * kMi, 4), 7);
  EXPECT_EQ(RingChunkElements(256 * 1024, 64 * kMi, 2), 256 * 1024);

  // And the split collective sums as the documented ring order, bitwise:
  // segments of 524,289 floats in two chunks (262,145 and 262,144).
  RingOptions options;  // default chunk_elements
  for (int world : {2, 4}) {
    auto ring = InProcessRing::Create(world);
    const int64_t count = world * int64_t{524289} - 1;  // uneven segments
    const Buffers inputs = MakeInputs(world, count, 11);
    const std::vector<float> expected = RingOrderSum(inputs);
    Buffers buffers = inputs;
    const std::vector<absl::Status> statuses =
        RunAll(*ring, buffers, CollectiveTag{0, 0, 0}, options);
    for (int r = 0; r < world; ++r) {
      ASSERT_TRUE(statuses[r].ok()) << statuses[r];
      EXPECT_TRUE(BitwiseEqual(buffers[r], expected))
          << "world " << world << " rank " << r;
    }
  }
}

TEST(RingAllReduceTest, TwoBucketsInFlightConcurrently) {
  const int world = 4;
  const int64_t counts[2] = {100003, 77777};
  RingOptions options;
  options.chunk_elements = 1000;  // many interleaved messages
  auto ring = InProcessRing::Create(world);
  Buffers inputs[2], buffers[2];
  std::vector<float> expected[2];
  for (int b = 0; b < 2; ++b) {
    inputs[b] = MakeInputs(world, counts[b], /*salt=*/b + 1);
    expected[b] = RingOrderSum(inputs[b]);
    buffers[b] = inputs[b];
  }
  std::vector<absl::Status> statuses(2 * world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    for (int b = 0; b < 2; ++b) {
      threads.emplace_back([&, r, b] {
        statuses[b * world + r] =
            RingAllReduce(ring->endpoint(r), CollectiveTag{2, 9, b},
                          buffers[b][r].data(), counts[b], options);
      });
    }
  }
  for (std::thread& t : threads) t.join();
  for (int b = 0; b < 2; ++b) {
    for (int r = 0; r < world; ++r) {
      ASSERT_TRUE(statuses[b * world + r].ok()) << statuses[b * world + r];
      EXPECT_TRUE(BitwiseEqual(buffers[b][r], expected[b]))
          << "bucket " << b << " rank " << r;
    }
  }
}

// bfloat16 rounding written out independently of the library: the nearer
// of the two bfloat16 neighbours (truncation and the next one up), ties to
// the one with an even last bit. Finite inputs only.
float RoundToBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  const uint32_t down_bits = bits & 0xffff0000u;
  const uint32_t up_bits = down_bits + 0x10000u;
  float down, up;
  std::memcpy(&down, &down_bits, sizeof(down));
  std::memcpy(&up, &up_bits, sizeof(up));
  const double to_down = std::fabs(static_cast<double>(x) - down);
  const double to_up = std::fabs(static_cast<double>(up) - x);
  if (to_down < to_up) return down;
  if (to_up < to_down) return up;
  return (down_bits & 0x10000u) == 0 ? down : up;
}

TEST(RingAllReduceTest, BfloatWireFollowsTheDocumentedRoundingBitwise) {
  RingOptions options;
  options.wire = WireType::kBfloat16;
  options.chunk_elements = 1000;  // several chunks per segment
  for (int world = 2; world <= 5; ++world) {
    auto ring = InProcessRing::Create(world);
    int64_t step = 0;
    for (int64_t count : {1, 7, 1001, 100003}) {
      const Buffers inputs = MakeInputs(world, count, count);
      // The documented bfloat16 ring (core/collective/ring_allreduce.h,
      // "Compression"): each hop adds its float32 value to the partial sum
      // rounded to bfloat16; the finished sum is rounded once more.
      const std::vector<float> expected = RingOrderSum(inputs, &RoundToBf16);
      const std::vector<float> exact = RingOrderSum(inputs);
      Buffers buffers = inputs;
      const std::vector<absl::Status> statuses =
          RunAll(*ring, buffers, CollectiveTag{0, step++, 0}, options);
      for (int r = 0; r < world; ++r) {
        ASSERT_TRUE(statuses[r].ok()) << statuses[r];
        ASSERT_TRUE(BitwiseEqual(buffers[r], expected))
            << "world " << world << " count " << count << " rank " << r;
      }
      // Every result is a bfloat16 value, within world rounding steps of
      // 2^-8 of the float32 sum (relative to the summed magnitudes).
      for (int64_t i = 0; i < count; ++i) {
        uint32_t bits;
        std::memcpy(&bits, &buffers[0][i], sizeof(bits));
        ASSERT_EQ(bits & 0xffffu, 0u) << i;
        double magnitude = 0;
        for (int r = 0; r < world; ++r) magnitude += std::fabs(inputs[r][i]);
        ASSERT_LE(std::fabs(buffers[0][i] - exact[i]),
                  world * std::ldexp(magnitude, -8))
            << "world " << world << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace lockstep
