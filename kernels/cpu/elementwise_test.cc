#include "kernels/cpu/elementwise.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

double Act(ActivationKind act, double v) {
  switch (act) {
    case ActivationKind::kRelu:
      return v > 0 ? v : 0;
    case ActivationKind::kTanh:
      return std::tanh(v);
    case ActivationKind::kSigmoid:
      return 1 / (1 + std::exp(-v));
    default:
      return v;
  }
}

class ElementwiseTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { SetNumThreads(GetParam()); }
};

TEST_P(ElementwiseTest, BiasAndBiasGrad) {
  for (int64_t rows : {0, 1, 255, 256, 257, 1000}) {
    const int64_t cols = 7;
    std::vector<float> y = RandomVector(rows * cols, 1),
                       b = RandomVector(cols, 2);
    std::vector<float> want = y;
    AddBias(rows, cols, b.data(), y.data());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) want[r * cols + c] += b[c];
    }
    EXPECT_EQ(y, want);
    std::vector<float> db(cols, 99.0f);
    BiasGrad(rows, cols, y.data(), db.data());
    for (int64_t c = 0; c < cols; ++c) {
      double s = 0;
      for (int64_t r = 0; r < rows; ++r) s += y[r * cols + c];
      EXPECT_NEAR(db[c], s, 1e-3) << rows;
    }
  }
}

TEST_P(ElementwiseTest, BiasGradDoesNotDependOnThreads) {
  const int64_t rows = 5000, cols = 3;
  std::vector<float> dy = RandomVector(rows * cols, 3);
  std::vector<float> a(cols), b(cols);
  BiasGrad(rows, cols, dy.data(), a.data());
  const int before = NumThreads();
  SetNumThreads(before == 1 ? 3 : 1);
  BiasGrad(rows, cols, dy.data(), b.data());
  SetNumThreads(before);
  EXPECT_EQ(a, b);
}

TEST_P(ElementwiseTest, ActivationsForwardAndBackward) {
  const int64_t rows = 301, cols = 13;
  for (ActivationKind act : {ActivationKind::kLinear, ActivationKind::kRelu,
                             ActivationKind::kTanh, ActivationKind::kSigmoid}) {
    std::vector<float> z = RandomVector(rows * cols, 4, -3, 3);
    std::vector<float> bias = RandomVector(cols, 5);
    std::vector<float> y = z;
    BiasActivationForward(rows, cols, bias.data(), act, y.data());
    std::vector<float> dy = RandomVector(rows * cols, 6);
    std::vector<float> dz = dy;
    ActivationBackward(rows, cols, act, y.data(), dz.data());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t i = r * cols + c;
        const double pre = double{z[i]} + bias[c];
        ASSERT_NEAR(y[i], Act(act, pre), 1e-5);
        const double h = 1e-3;
        const double slope = (Act(act, pre + h) - Act(act, pre - h)) / (2 * h);
        if (act == ActivationKind::kRelu && std::fabs(pre) < 2 * h) continue;
        ASSERT_NEAR(dz[i], dy[i] * slope, 1e-4) << static_cast<int>(act);
      }
    }
  }
}

TEST_P(ElementwiseTest, SoftmaxForwardAndBackward) {
  const int64_t rows = 37, cols = 10;
  std::vector<float> x = RandomVector(rows * cols, 7, -50, 50);
  std::vector<float> y(rows * cols);
  SoftmaxRows(rows, cols, x.data(), y.data());
  std::vector<float> y2 = x;
  BiasActivationForward(rows, cols, nullptr, ActivationKind::kSoftmax,
                        y2.data());
  EXPECT_EQ(y, y2);
  for (int64_t r = 0; r < rows; ++r) {
    double m = -1e30, s = 0;
    for (int64_t c = 0; c < cols; ++c) m = std::max<double>(m, x[r * cols + c]);
    for (int64_t c = 0; c < cols; ++c) s += std::exp(x[r * cols + c] - m);
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_NEAR(y[r * cols + c], std::exp(x[r * cols + c] - m) / s, 1e-6);
    }
  }
  // Backward against the Jacobian: dz_j = sum_i dy_i y_i (delta_ij - y_j).
  std::vector<float> dy = RandomVector(rows * cols, 8);
  std::vector<float> dz = dy;
  ActivationBackward(rows, cols, ActivationKind::kSoftmax, y.data(), dz.data());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < cols; ++j) {
      double s = 0;
      for (int64_t i = 0; i < cols; ++i) {
        const double yi = y[r * cols + i], yj = y[r * cols + j];
        s += dy[r * cols + i] * yi * ((i == j ? 1 : 0) - yj);
      }
      ASSERT_NEAR(dz[r * cols + j], s, 1e-5);
    }
  }
}

TEST_P(ElementwiseTest, ScaleAndAxpy) {
  const int64_t n = 100003;
  std::vector<float> x = RandomVector(n, 9), y = RandomVector(n, 10);
  std::vector<float> want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = y[i] + 0.5f * x[i];
  Axpy(n, 0.5f, x.data(), y.data());
  EXPECT_EQ(y, want);
  for (int64_t i = 0; i < n; ++i) want[i] *= -2.0f;
  Scale(n, -2.0f, y.data());
  EXPECT_EQ(y, want);
  Scale(0, 3.0f, nullptr);
  Axpy(0, 3.0f, nullptr, nullptr);
}

INSTANTIATE_TEST_SUITE_P(Threads, ElementwiseTest, ::testing::Values(1, 2, 4));

}  // namespace
}  // namespace lockstep
