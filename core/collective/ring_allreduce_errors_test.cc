// Tests of RingAllReduce's failures: messages of the wrong wire type,
// length or generation refused (not summed), bad arguments, a missing peer
// timing out naming the rank, and an abort waking a waiting rank.
#include "core/collective/ring_allreduce.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
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
using testing::RankInput;
using testing::RingOrderSum;
using testing::RunAll;
using testing::RunRanks;

// World 2, count 10: rank 1's first receive is segment 0 (5 values) at ring
// step 0, message number 0. Runs rank 1 alone after injecting `bytes` (as
// float32) as that message; `data` must come back unchanged.
absl::Status RankOneAfterInjecting(const std::string& bytes, WireType wire,
                                   const CollectiveTag& tag) {
  auto ring = InProcessRing::Create(2);
  ring->InjectFromPrev(1, tag, bytes);
  const std::vector<float> input = RankInput(1, 10);
  std::vector<float> data = input;
  RingOptions options;
  options.timeout = absl::Seconds(5);
  options.wire = wire;
  const absl::Status status =
      RingAllReduce(ring->endpoint(1), tag, data.data(), 10, options);
  EXPECT_TRUE(BitwiseEqual(data, input)) << "the message was applied";
  return status;
}

TEST(RingAllReduceTest, BfloatReceiverRefusesFloatMessages) {
  const absl::Status status = RankOneAfterInjecting(
      std::string(20, '\x01'), WireType::kBfloat16, CollectiveTag{1, 7, 3, 0});
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(),
              HasSubstr("rank 0 sent float32 values where bfloat16 were "
                        "expected"));
}

TEST(RingAllReduceTest, RanksThatDisagreeOnTheWireTypeFailNamingBoth) {
  auto ring = InProcessRing::Create(2);
  Buffers buffers = MakeInputs(2, 64);
  const Buffers inputs = buffers;
  RingOptions bf16, f32;
  bf16.wire = WireType::kBfloat16;
  bf16.timeout = f32.timeout = absl::Seconds(5);
  absl::Status statuses[2];
  std::thread t0([&] {
    statuses[0] = RingAllReduce(ring->endpoint(0), CollectiveTag{1, 1, 0},
                                buffers[0].data(), 64, bf16);
    if (!statuses[0].ok()) ring->endpoint(0).Abort(statuses[0]);
  });
  statuses[1] = RingAllReduce(ring->endpoint(1), CollectiveTag{1, 1, 0},
                              buffers[1].data(), 64, f32);
  if (!statuses[1].ok()) ring->AbortAll(statuses[1]);
  t0.join();
  EXPECT_TRUE(absl::IsInvalidArgument(statuses[1])) << statuses[1];
  EXPECT_THAT(statuses[1].message(),
              HasSubstr("rank 0 sent bfloat16 values where float32 were "
                        "expected"));
  EXPECT_FALSE(statuses[0].ok());
  EXPECT_TRUE(BitwiseEqual(buffers[1], inputs[1]));
}

TEST(RingAllReduceTest, RejectsBadArguments) {
  auto ring = InProcessRing::Create(2);
  std::vector<float> data(4);
  RingOptions options;
  options.chunk_elements = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(
      RingAllReduce(ring->endpoint(0), {}, data.data(), 4, options)));
  EXPECT_TRUE(absl::IsInvalidArgument(
      RingAllReduce(ring->endpoint(0), {}, data.data(), -1, RingOptions())));
  EXPECT_TRUE(absl::IsInvalidArgument(
      RingAllReduce(ring->endpoint(0), {}, nullptr, 4, RingOptions())));
  EXPECT_EQ(InProcessRing::Create(0), nullptr);
}

// Segment 0 is 5 floats, 20 bytes.
TEST(RingAllReduceTest, WrongLengthMessageIsRefusedNotSummed) {
  const CollectiveTag tag{1, 7, 3, 0};
  const absl::Status status =
      RankOneAfterInjecting(std::string(12, '\x01'), WireType::kFloat32, tag);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("expected 20 bytes"));
  EXPECT_THAT(status.message(), HasSubstr("received 12 bytes"));
  EXPECT_THAT(status.message(), HasSubstr("from rank 0"));
  EXPECT_THAT(status.message(), HasSubstr(TagToString(tag)));
}

TEST(RingAllReduceTest, StaleGenerationMessageIsRefusedNotSummed) {
  auto ring = InProcessRing::Create(2);
  ring->SetCurrentGeneration(0, 5);
  ring->SetCurrentGeneration(1, 5);
  // The current generation goes through.
  Buffers inputs = MakeInputs(2, 10);
  Buffers buffers = inputs;
  for (const absl::Status& s : RunAll(*ring, buffers, {5, 1, 3})) {
    ASSERT_TRUE(s.ok()) << s;
  }
  EXPECT_TRUE(BitwiseEqual(buffers[1], RingOrderSum(inputs)));
  // A well-formed message for rank 1's first receive, but of generation 4.
  const std::vector<float> poison(5, 1e30f);
  ring->InjectFromPrev(1, CollectiveTag{4, 2, 3, 0},
                       std::string(reinterpret_cast<const char*>(poison.data()),
                                   poison.size() * sizeof(float)));
  std::vector<float> data = inputs[1];
  RingOptions options;
  options.timeout = absl::Seconds(5);
  const absl::Status status = RingAllReduce(
      ring->endpoint(1), CollectiveTag{5, 2, 3}, data.data(), 10, options);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(status.message(),
              HasSubstr("rank 0 sent a message for stale generation 4 "
                        "(current 5): refused"));
  EXPECT_TRUE(BitwiseEqual(data, inputs[1]));
}

TEST(RingAllReduceTest, MissingPeerTimesOutNamingTheRank) {
  auto ring = InProcessRing::Create(3);
  Buffers buffers = MakeInputs(3, 1000);
  RingOptions options;
  options.timeout = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  const std::vector<absl::Status> statuses =
      RunRanks(*ring, {0, 1}, buffers, CollectiveTag{0, 4, 0}, options);
  const absl::Duration elapsed = absl::Now() - start;
  EXPECT_TRUE(absl::IsDeadlineExceeded(statuses[0])) << statuses[0];
  EXPECT_THAT(statuses[0].message(), HasSubstr("waiting for rank 2"));
  EXPECT_THAT(statuses[0].message(), HasSubstr("from rank 2"));
  EXPECT_TRUE(absl::IsDeadlineExceeded(statuses[1])) << statuses[1];
  EXPECT_THAT(statuses[1].message(), HasSubstr("waiting for rank 0"));
  EXPECT_GE(elapsed, absl::Milliseconds(300));
  EXPECT_LT(elapsed, absl::Seconds(2));
}

TEST(RingAllReduceTest, AbortWakesAWaitingRank) {
  auto ring = InProcessRing::Create(2);
  std::vector<float> data = RankInput(0, 1000);
  absl::Status status;
  const absl::Time start = absl::Now();
  std::thread rank0([&] {
    status = RingAllReduce(ring->endpoint(0), CollectiveTag{0, 5, 0},
                           data.data(), data.size(), RingOptions());
  });
  absl::SleepFor(absl::Milliseconds(100));
  ring->endpoint(0).Abort(absl::CancelledError("job cancelled"));
  rank0.join();
  EXPECT_TRUE(absl::IsAborted(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("job cancelled"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  // Later calls fail at once too.
  EXPECT_TRUE(absl::IsAborted(RingAllReduce(ring->endpoint(0), {}, data.data(),
                                            data.size(), RingOptions())));
}

}  // namespace
}  // namespace lockstep
