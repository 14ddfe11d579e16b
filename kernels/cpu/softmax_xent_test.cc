#include "kernels/cpu/softmax_xent.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/mse.h"
#include "kernels/cpu/test_util.h"

namespace lockstep {
namespace {

TEST(SoftmaxXentTest, MatchesNaiveLossGradientAndAccuracy) {
  const int64_t rows = 33, cols = 10;
  std::vector<float> x = RandomVector(rows * cols, 1, -5, 5);
  std::vector<int32_t> labels(rows);
  for (int64_t r = 0; r < rows; ++r) labels[r] = (r * 7) % cols;
  std::vector<float> grad(rows * cols), row_loss(rows);
  const float scale = 0.25f;
  LossSums s = SoftmaxCrossEntropy(rows, cols, x.data(), labels.data(), scale,
                                   grad.data(), row_loss.data());
  double total = 0;
  int64_t correct = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * cols;
    double z = 0;
    int64_t best = 0;
    for (int64_t c = 0; c < cols; ++c) {
      z += std::exp(double{xr[c]});
      if (xr[c] > xr[best]) best = c;
    }
    correct += best == labels[r];
    const double loss = std::log(z) - xr[labels[r]];
    total += loss;
    EXPECT_NEAR(row_loss[r], loss, 1e-5);
    for (int64_t c = 0; c < cols; ++c) {
      const double want =
          (std::exp(double{xr[c]}) / z - (c == labels[r] ? 1 : 0)) * scale;
      EXPECT_NEAR(grad[r * cols + c], want, 1e-6);
    }
  }
  EXPECT_NEAR(s.loss_sum, total, 1e-4);
  EXPECT_EQ(s.correct, correct);
  EXPECT_EQ(CountArgmaxCorrect(rows, cols, x.data(), labels.data()), correct);
}

TEST(SoftmaxXentTest, StableForHugeLogitsAndInPlace) {
  std::vector<float> x = {1000.0f, -1000.0f, 999.0f};
  std::vector<int32_t> labels = {2};
  LossSums s = SoftmaxCrossEntropy(1, 3, x.data(), labels.data(), 1.0f,
                                   x.data(), nullptr);
  const double want = std::log(1 + std::exp(-1.0)) + 1.0;
  EXPECT_NEAR(s.loss_sum, want, 1e-5);
  EXPECT_EQ(s.correct, 0);
  EXPECT_NEAR(x[0], 1 / (1 + std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(x[1], 0.0, 1e-6);
  EXPECT_NEAR(x[2], 1 / (1 + std::exp(1.0)) - 1, 1e-6);
  EXPECT_TRUE(std::isfinite(x[0]));
}

TEST(SoftmaxXentTest, ZeroRows) {
  LossSums s =
      SoftmaxCrossEntropy(0, 10, nullptr, nullptr, 1.0f, nullptr, nullptr);
  EXPECT_EQ(s.loss_sum, 0);
  EXPECT_EQ(s.correct, 0);
  s = MeanSquaredError(0, 10, nullptr, nullptr, 1.0f, nullptr);
  EXPECT_EQ(s.loss_sum, 0);
}

TEST(MseTest, OneHotTargetsAndGradient) {
  const int64_t rows = 9, cols = 4;
  std::vector<float> y = RandomVector(rows * cols, 2);
  std::vector<int32_t> labels(rows);
  for (int64_t r = 0; r < rows; ++r) labels[r] = r % cols;
  std::vector<float> grad(rows * cols);
  LossSums s =
      MeanSquaredError(rows, cols, y.data(), labels.data(), 0.5f, grad.data());
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double l = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const double d = y[r * cols + c] - (c == labels[r] ? 1.0 : 0.0);
      l += d * d;
      EXPECT_NEAR(grad[r * cols + c], 0.5 * 2 * d / cols, 1e-6);
    }
    total += l / cols;
  }
  EXPECT_NEAR(s.loss_sum, total, 1e-5);
  EXPECT_EQ(s.correct, CountArgmaxCorrect(rows, cols, y.data(), labels.data()));
}

TEST(MseTest, SingleUnitRegressesOnTheLabelValue) {
  std::vector<float> y = {0.5f, 3.0f};
  std::vector<int32_t> labels = {1, 2};
  std::vector<float> grad(2);
  LossSums s =
      MeanSquaredError(2, 1, y.data(), labels.data(), 1.0f, grad.data());
  EXPECT_NEAR(s.loss_sum, 0.25 + 1.0, 1e-6);
  EXPECT_NEAR(grad[0], -1.0, 1e-6);
  EXPECT_NEAR(grad[1], 2.0, 1e-6);
}

}  // namespace
}  // namespace lockstep
