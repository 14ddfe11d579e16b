#include "kernels/cpu/dropout.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

TEST(DropoutTest, InvertedMaskIsAPureFunctionOfTheSeed) {
  const int64_t n = 100000;
  const float rate = 0.3f;
  std::vector<float> x(n, 1.0f), y(n), y2(n), y3(n);
  SetNumThreads(1);
  DropoutForward(n, rate, 42, x.data(), y.data());
  SetNumThreads(3);
  DropoutForward(n, rate, 42, x.data(), y2.data());
  DropoutForward(n, rate, 43, x.data(), y3.data());
  EXPECT_EQ(y, y2);
  EXPECT_NE(y, y3);
  int64_t kept = 0;
  for (float v : y) {
    if (v != 0) {
      ++kept;
      EXPECT_FLOAT_EQ(v, 1.0f / 0.7f);
    }
  }
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.7, 0.01);
  // Backward uses the same mask and scale.
  std::vector<float> dy = RandomVector(n, 1), dx(n);
  DropoutBackward(n, rate, 42, dy.data(), dx.data());
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_FLOAT_EQ(dx[i], y[i] == 0 ? 0.0f : dy[i] / 0.7f);
  }
  // In place.
  DropoutBackward(n, rate, 42, dy.data(), dy.data());
  EXPECT_EQ(dx, dy);
}

TEST(DropoutTest, RangesAgreeWithDropoutKeepAcrossThe32BitBoundary) {
  // A slice of a larger masked tensor (DropoutRange) keeps exactly the
  // elements DropoutKeep says, also where the index's high word changes,
  // and neighbouring masks (seeds 1 and 2) are not correlated.
  const float rate = 0.25f;
  const int64_t n = 4096;
  for (int64_t first : {int64_t{0}, int64_t{123457}, (int64_t{1} << 32) - 1000,
                        (int64_t{5} << 32) + 17}) {
    std::vector<float> x(n, 2.0f), y(n);
    DropoutRange(first, n, rate, 0x1234567890abcdefull, x.data(), y.data());
    int64_t kept = 0;
    for (int64_t e = 0; e < n; ++e) {
      const bool keep = DropoutKeep(0x1234567890abcdefull, first + e, rate);
      ASSERT_EQ(y[e], keep ? 2.0f / 0.75f : 0.0f) << first << " + " << e;
      kept += keep;
    }
    EXPECT_NEAR(static_cast<double>(kept) / n, 0.75, 0.03) << first;
  }
  int64_t both = 0;
  const int64_t m = 200000;
  for (int64_t i = 0; i < m; ++i) {
    both += DropoutKeep(1, i, 0.5f) && DropoutKeep(2, i, 0.5f);
  }
  EXPECT_NEAR(static_cast<double>(both) / m, 0.25, 0.005);
}

TEST(DropoutTest, RateZeroKeepsEverything) {
  std::vector<float> x = RandomVector(1000, 2), y(1000);
  DropoutForward(1000, 0.0f, 7, x.data(), y.data());
  EXPECT_EQ(x, y);
  DropoutForward(0, 0.5f, 7, nullptr, nullptr);
}

}  // namespace
}  // namespace lockstep
