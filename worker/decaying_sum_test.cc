#include "worker/decaying_sum.h"

#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(DecayingSumTest, HalvesEachHalfLifeAndAddsOnTop) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  DecayingSum s(absl::Seconds(10));
  EXPECT_EQ(s.Value(t0), 0);
  s.Add(8, t0);
  EXPECT_DOUBLE_EQ(s.Value(t0), 8);
  EXPECT_DOUBLE_EQ(s.Value(t0 + absl::Seconds(10)), 4);
  EXPECT_DOUBLE_EQ(s.Value(t0 + absl::Seconds(30)), 1);
  s.Add(2, t0 + absl::Seconds(10));
  EXPECT_DOUBLE_EQ(s.Value(t0 + absl::Seconds(10)), 6);
  EXPECT_DOUBLE_EQ(s.Value(t0 + absl::Seconds(20)), 3);
  // A clock read before the last add (another thread's earlier now) does
  // not grow the sum.
  EXPECT_DOUBLE_EQ(s.Value(t0), 6);
}

// Two sums fed together: their ratio follows the recent rate, not the
// whole history's.
TEST(DecayingSumTest, ARatioOfTwoFollowsTheRecentRate) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  DecayingSum bytes, seconds;
  for (int i = 0; i < 600; ++i) {  // a minute at 1 ms per MB
    bytes.Add(1e6, t0 + absl::Milliseconds(100 * i));
    seconds.Add(1e-3, t0 + absl::Milliseconds(100 * i));
  }
  for (int i = 600; i < 900; ++i) {  // then 30 s at 10 ms per MB
    bytes.Add(1e6, t0 + absl::Milliseconds(100 * i));
    seconds.Add(1e-2, t0 + absl::Milliseconds(100 * i));
  }
  const absl::Time now = t0 + absl::Seconds(90);
  const double ms_per_mb = seconds.Value(now) / bytes.Value(now) * 1e9;
  EXPECT_GT(ms_per_mb, 8.0);  // the whole history's mean would be 4
  EXPECT_LT(ms_per_mb, 10.0);
}

}  // namespace
}  // namespace lockstep
