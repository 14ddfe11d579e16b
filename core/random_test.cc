#include "core/random.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(RandomTest, SplitMix64MatchesReference) {
  // Reference values of SplitMix64 seeded with 1234567 (Vigna's splitmix64.c).
  uint64_t s = 1234567;
  EXPECT_EQ(SplitMix64(&s), 6457827717110365317ULL);
  EXPECT_EQ(SplitMix64(&s), 3203168211198807973ULL);
  EXPECT_EQ(SplitMix64(&s), 9817491932198370423ULL);
}

TEST(RandomTest, SameSeedSameStream) {
  Rng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.NextU64();
    EXPECT_EQ(x, b.NextU64());
    differs |= x != c.NextU64();
  }
  EXPECT_TRUE(differs);
}

TEST(RandomTest, MixSeedIsOrderedAndSpread) {
  EXPECT_NE(MixSeed(1, 2), MixSeed(2, 1));
  EXPECT_NE(MixSeed(0, 0), MixSeed(0, 1));
  EXPECT_EQ(MixSeed(7, 9), MixSeed(7, 9));
}

TEST(RandomTest, UniformInRangeWithRightMean) {
  Rng rng(1);
  double sum = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const float u = rng.Uniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);
  for (int i = 0; i < 1000; ++i) {
    const float v = rng.Uniform(-2.0f, 3.0f);
    ASSERT_GE(v, -2.0f);
    ASSERT_LT(v, 3.0f);
  }
}

TEST(RandomTest, UniformIntCoversRangeEvenly) {
  Rng rng(2);
  std::vector<int> hist(7, 0);
  const int n = 70000;
  for (int i = 0; i < n; ++i) {
    const uint64_t k = rng.UniformInt(7);
    ASSERT_LT(k, 7u);
    ++hist[k];
  }
  for (int h : hist) EXPECT_NEAR(h, n / 7, 400);
  EXPECT_EQ(rng.UniformInt(1), 0u);
}

TEST(RandomTest, NormalHasUnitMoments) {
  Rng rng(3);
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = rng.NormalDouble();
    ASSERT_TRUE(std::isfinite(x));
    sum += x;
    sq += x * x;
  }
  const double mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(sq / n - mean * mean, 1.0, 0.02);
  Rng r2(4);
  double s2 = 0;
  for (int i = 0; i < 10000; ++i) s2 += r2.Normal(5.0f, 0.5f);
  EXPECT_NEAR(s2 / 10000, 5.0, 0.02);
}

}  // namespace
}  // namespace lockstep
