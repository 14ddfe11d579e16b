#include "base/time_source.h"

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(TimeSourceTest, ManualTimeMovesOnlyWhenTold) {
  ManualTime t;
  const absl::Time start = t.Now();
  EXPECT_LE(start, absl::Now());
  absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(t.Now(), start);
  t.Advance(absl::Seconds(2.5));
  EXPECT_EQ(t.Now() - start, absl::Seconds(2.5));
  t.Advance(-absl::Seconds(10));  // never back
  EXPECT_EQ(t.Now() - start, absl::Seconds(2.5));
}

TEST(TimeSourceTest, RealTimeIsAbslNow) {
  const absl::Time before = absl::Now();
  const absl::Time now = RealTime()->Now();
  EXPECT_GE(now, before);
  EXPECT_LE(now, absl::Now());
}

}  // namespace
}  // namespace lockstep
