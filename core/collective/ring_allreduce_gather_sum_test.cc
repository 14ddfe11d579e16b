// Tests of GatherSum: the rank-order sum, bitwise on every rank, for any
// world; refused arguments; a missing peer timing out naming the rank.
#include "core/collective/ring_allreduce.h"

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/collective/in_process_transport.h"
#include "core/collective/ring_allreduce_test_util.h"
#include "core/collective/transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using testing::BitwiseEqual;
using testing::Buffers;
using ::testing::HasSubstr;
using testing::MakeInputs;
using testing::RingOrderSum;
using testing::RunRanks;

// GatherSum: the rank-order sum, bitwise on every rank, for any world.
std::vector<float> RankOrderSum(const Buffers& inputs) {
  std::vector<float> sum = inputs[0];
  for (size_t r = 1; r < inputs.size(); ++r) {
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += inputs[r][i];
  }
  return sum;
}

std::vector<absl::Status> GatherAll(InProcessRing& ring, Buffers& buffers,
                                    const std::vector<int>& ranks,
                                    const CollectiveTag& tag,
                                    const RingOptions& options = {}) {
  return RunRanks(ring, ranks, buffers, tag, options, &GatherSum);
}

TEST(GatherSumTest, EveryRankGetsTheRankOrderSumBitwise) {
  for (int world : {1, 2, 3, 5}) {
    for (int64_t count : {int64_t{1}, int64_t{3}, int64_t{2561}}) {
      SCOPED_TRACE(absl::StrCat("world ", world, " count ", count));
      auto ring = InProcessRing::Create(world);
      const Buffers inputs = MakeInputs(world, count, 7);
      Buffers buffers = inputs;
      std::vector<int> ranks;
      for (int r = 0; r < world; ++r) ranks.push_back(r);
      for (const absl::Status& s :
           GatherAll(*ring, buffers, ranks, CollectiveTag{0, 3, 9, 0})) {
        ASSERT_TRUE(s.ok()) << s;
      }
      const std::vector<float> want = RankOrderSum(inputs);
      for (int r = 0; r < world; ++r) {
        EXPECT_TRUE(BitwiseEqual(buffers[r], want)) << "rank " << r;
      }
      // For 3 or more ranks the order shows in the bits: the ring's
      // segment order gives other ones for these inputs.
      if (world >= 3 && count == 2561) {
        EXPECT_FALSE(BitwiseEqual(want, RingOrderSum(inputs)));
      }
    }
  }
}

TEST(GatherSumTest, RefusesBfloatAndBadArguments) {
  auto ring = InProcessRing::Create(2);
  std::vector<float> data(4);
  RingOptions bf16;
  bf16.wire = WireType::kBfloat16;
  const absl::Status s = GatherSum(ring->endpoint(0), {}, data.data(), 4, bf16);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_EQ(s.message(), "gather-sum: sends float32, not bfloat16");
  EXPECT_EQ(GatherSum(ring->endpoint(0), {}, data.data(), -1, RingOptions())
                .message(),
            "gather-sum: negative count -1");
  EXPECT_EQ(
      GatherSum(ring->endpoint(0), {}, nullptr, 4, RingOptions()).message(),
      "gather-sum: null data");
}

TEST(GatherSumTest, MissingPeerTimesOutNamingTheRank) {
  auto ring = InProcessRing::Create(3);
  Buffers buffers = MakeInputs(3, 10);
  const std::vector<float> before = buffers[0];
  RingOptions options;
  options.timeout = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  const std::vector<absl::Status> statuses =
      GatherAll(*ring, buffers, {0, 1}, CollectiveTag{0, 4, 11, 0}, options);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_TRUE(absl::IsDeadlineExceeded(statuses[0])) << statuses[0];
  EXPECT_THAT(statuses[0].message(),
              HasSubstr("rank 2's values (gather-sum step 0"));
  EXPECT_THAT(statuses[0].message(), HasSubstr("from rank 2"));
  // A failed sum leaves the caller's values alone.
  EXPECT_TRUE(BitwiseEqual(buffers[0], before));
}

}  // namespace
}  // namespace lockstep
