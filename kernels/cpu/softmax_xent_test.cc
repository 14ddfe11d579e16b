#include "kernels/cpu/softmax_xent.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/bce.h"
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

// Against -[t log sigmoid(z) + (1 - t) log(1 - sigmoid(z))] in long double,
// from z = -100 to 100 (where the naive formula overflows or takes log(0)).
TEST(BceTest, StableLossGradientAndAccuracyFromLogits) {
  const std::vector<float> z = {-100.0f, -20.0f, -2.0f, -0.0f, 0.5f,
                                3.0f,    30.0f,  100.0f, 1.0f};
  const std::vector<int32_t> t = {1, 0, 0, 1, 1, 0, 1, 0, -1};
  std::vector<float> grad = z;  // in place
  const LossSums s = BinaryCrossEntropy(static_cast<int64_t>(z.size()),
                                        grad.data(), t.data(), 0.25f,
                                        grad.data());
  long double total = 0;
  int64_t correct = 0;
  for (size_t r = 0; r + 1 < z.size(); ++r) {
    const long double zl = z[r];
    // log(1 + e^-|z|) written out, then the two cases of the label.
    const long double soft = std::log1p(std::exp(-std::fabs(zl)));
    const long double log_p = zl >= 0 ? -soft : zl - soft;       // log s(z)
    const long double log_q = zl >= 0 ? -zl - soft : -soft;      // log 1-s(z)
    total += -(t[r] == 1 ? log_p : log_q);
    const long double p = 1 / (1 + std::exp(-zl));
    EXPECT_NEAR(grad[r], static_cast<double>((p - t[r]) * 0.25L), 1e-7)
        << "z " << z[r];
    correct += (z[r] > 0) == (t[r] == 1);
  }
  EXPECT_NEAR(s.loss_sum, static_cast<double>(total), 1e-9 * total);
  EXPECT_EQ(s.count, 8);  // the unlabelled row is not counted
  EXPECT_EQ(s.correct, correct);
  // Right at z -20, -2 (label 0) and 0.5, 30 (label 1); z = -0 predicts
  // 0 (a probability of exactly 0.5 is not above it).
  EXPECT_EQ(s.correct, 4);
  EXPECT_EQ(grad.back(), 0.0f);
  EXPECT_GT(s.loss_sum, 200.0);  // the two confident mistakes cost ~100 each
}

}  // namespace
}  // namespace lockstep
