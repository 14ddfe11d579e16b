// A sample record survives its message; odd positions are refused.
#include "rpc/sample_wire.h"

#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(SampleWireTest, ARecordRoundTrips) {
  SampleRecord r;
  r.generation = 3;
  r.rank = 1;
  r.step = 250;
  r.epoch = 1;
  r.epoch_samples = 8000;
  r.positions = {{0, 16}, {48, 64}};
  r.hash = 0xdeadbeef;
  r.count = 32;
  r.replicas = {0, 2};
  r.world_replicas = 3;
  absl::StatusOr<SampleRecord> back =
      SampleRecordFromWire(SampleRecordToWire(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->generation, 3);
  EXPECT_EQ(back->rank, 1);
  EXPECT_EQ(back->step, 250);
  EXPECT_EQ(back->epoch, 1);
  EXPECT_EQ(back->epoch_samples, 8000);
  EXPECT_EQ(back->positions, r.positions);
  EXPECT_EQ(back->hash, 0xdeadbeefu);
  EXPECT_EQ(back->count, 32);
  EXPECT_EQ(back->replicas, r.replicas);
  EXPECT_EQ(back->world_replicas, 3);
}

TEST(SampleWireTest, AnOddPositionIsRefused) {
  lockstep::v1::SampleRecord m;
  m.add_positions(4);
  absl::StatusOr<SampleRecord> r = SampleRecordFromWire(m);
  ASSERT_TRUE(absl::IsInvalidArgument(r.status()));
  EXPECT_EQ(r.status().message(),
            "a sample record's positions come in [begin, end) pairs");
}

}  // namespace
}  // namespace lockstep
