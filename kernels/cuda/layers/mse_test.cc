// The GPU mean squared error against kernels/cpu/mse.h, bit for bit: loss
// sum, accuracy count and gradient, for one-hot (cols > 1) and regression
// (cols == 1) targets, including empty batches and aliased y/grad. And the
// GPU binary cross-entropy against kernels/cpu/bce.h (exp and log1p are the
// device's: agreement within a few ulps).
#include "kernels/cuda/layers/mse.h"

#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/bce.h"
#include "kernels/cpu/mse.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cuda/cuda_test_util.h"

namespace lockstep {
namespace cuda {
namespace {

struct Case {
  int64_t rows, cols;
};

class MseTest : public ::testing::TestWithParam<Case> {};

TEST_P(MseTest, MatchesCpuBitForBit) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const auto [rows, cols] = GetParam();
  const std::vector<float> y = RandomVector(rows * cols, 1, -2.0f, 2.0f);
  std::vector<int32_t> labels(rows);
  for (int64_t r = 0; r < rows; ++r) {
    labels[r] = static_cast<int32_t>((r * 7 + 3) % (cols > 1 ? cols : 5));
  }
  const float scale = 1.0f / 3.0f;
  std::vector<float> want_grad(y.size());
  const LossSums want = lockstep::MeanSquaredError(
      rows, cols, y.data(), labels.data(), scale, want_grad.data());

  for (bool alias : {false, true}) {
    SCOPED_TRACE(alias);
    DeviceArray<float> yd(y), grad(y.size());
    DeviceArray<int32_t> ld(labels);
    DeviceArray<char> ws(MeanSquaredErrorWorkspaceBytes(rows));
    DeviceArray<DeviceLossSums> sums(1);
    ASSERT_EQ(cuda::MeanSquaredError(rows, cols, yd.get(), ld.get(), scale,
                                     alias ? yd.get() : grad.get(), ws.get(),
                                     sums.get(), nullptr),
              cudaSuccess);
    const DeviceLossSums got = sums.ToHost()[0];
    EXPECT_EQ(std::memcmp(&want.loss_sum, &got.loss_sum, sizeof(double)), 0)
        << want.loss_sum << " vs " << got.loss_sum;
    EXPECT_EQ(want.correct, got.correct);
    const std::vector<float> g = alias ? yd.ToHost() : grad.ToHost();
    ASSERT_EQ(g.size(), want_grad.size());
    EXPECT_EQ(std::memcmp(g.data(), want_grad.data(), g.size() * 4), 0);
  }
  // Without a gradient (Evaluate) only the sums are written.
  DeviceArray<float> yd(y);
  DeviceArray<int32_t> ld(labels);
  DeviceArray<char> ws(MeanSquaredErrorWorkspaceBytes(rows));
  DeviceArray<DeviceLossSums> sums(1);
  ASSERT_EQ(cuda::MeanSquaredError(rows, cols, yd.get(), ld.get(), 0.0f,
                                   nullptr, ws.get(), sums.get(), nullptr),
            cudaSuccess);
  EXPECT_EQ(sums.ToHost()[0].loss_sum, want.loss_sum);
  EXPECT_EQ(yd.ToHost(), y);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MseTest,
                         ::testing::Values(Case{0, 10}, Case{1, 1}, Case{5, 1},
                                           Case{1, 10}, Case{33, 10},
                                           Case{300, 3}));

TEST(BceTest, MatchesCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (int64_t rows : {0, 1, 7, 300}) {
    std::vector<float> z = RandomVector(rows, 5, -30.0f, 30.0f);
    std::vector<int32_t> labels(rows);
    for (int64_t r = 0; r < rows; ++r) labels[r] = r % 5 == 4 ? -1 : r % 2;
    std::vector<float> want_grad(rows);
    const LossSums want = lockstep::BinaryCrossEntropy(
        rows, z.data(), labels.data(), 0.5f, want_grad.data());
    DeviceArray<float> zd(z), grad(std::vector<float>(rows, 9.0f));
    DeviceArray<int32_t> ld(labels);
    DeviceArray<char> ws(MeanSquaredErrorWorkspaceBytes(rows) + 1);
    DeviceArray<DeviceLossSums> sums(1);
    ASSERT_EQ(cuda::BinaryCrossEntropy(rows, zd.get(), ld.get(), 0.5f,
                                       grad.get(), ws.get(), sums.get(),
                                       nullptr),
              cudaSuccess);
    const DeviceLossSums got = sums.ToHost()[0];
    EXPECT_NEAR(got.loss_sum, want.loss_sum, 1e-12 * (1 + want.loss_sum));
    EXPECT_EQ(got.correct, want.correct);
    EXPECT_EQ(got.count, want.count);
    const std::vector<float> g = grad.ToHost();
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_NEAR(g[r], want_grad[r], 1e-7) << "row " << r;
    }
  }
}

}  // namespace
}  // namespace cuda
}  // namespace lockstep
