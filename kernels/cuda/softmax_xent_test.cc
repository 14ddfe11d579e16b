// The GPU softmax cross-entropy against kernels/cpu (to a few ulp: the two
// libraries' exponentials differ in the last bits).
#include "kernels/cuda/softmax_xent.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/softmax_xent.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cuda/cuda_test_util.h"

namespace lockstep {
namespace cuda {
namespace {

struct Case {
  int64_t rows, cols;
  float spread;  // logits in [-spread, spread]
};

class SoftmaxXentTest : public ::testing::TestWithParam<Case> {};

TEST_P(SoftmaxXentTest, MatchesCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const Case p = GetParam();
  const int64_t n = p.rows * p.cols;
  std::vector<float> logits = RandomVector(n, 11, -p.spread, p.spread);
  if (n > 3) logits[3] = logits[1];  // a tie for the first argmax
  std::vector<int32_t> labels(p.rows);
  for (int64_t r = 0; r < p.rows; ++r) labels[r] = (r * 7 + 3) % p.cols;
  const float scale = p.rows > 0 ? 1.0f / p.rows : 1.0f;

  std::vector<float> want_grad(n), want_loss(p.rows);
  const LossSums want = lockstep::SoftmaxCrossEntropy(
      p.rows, p.cols, logits.data(), labels.data(), scale, want_grad.data(),
      want_loss.data());

  for (bool in_place : {false, true}) {
    DeviceArray<float> d_logits(logits), d_grad(n), d_loss(p.rows);
    DeviceArray<int32_t> d_labels(labels);
    DeviceArray<char> workspace(SoftmaxCrossEntropyWorkspaceBytes(p.rows));
    DeviceArray<DeviceLossSums> d_sums(1);
    float* grad = in_place ? d_logits.get() : d_grad.get();
    ASSERT_EQ(SoftmaxCrossEntropy(p.rows, p.cols, d_logits.get(),
                                  d_labels.get(), scale, grad, d_loss.get(),
                                  workspace.get(), d_sums.get(), nullptr),
              cudaSuccess);
    const DeviceLossSums got = d_sums.ToHost()[0];
    EXPECT_EQ(got.correct, want.correct);
    // Each row's loss may differ by the row bound below (the GPU's expf and
    // logf are not glibc's), so their sum by the sum of those bounds.
    double sum_bound = 0;
    for (float l : want_loss) sum_bound += 2e-6 * std::max(1.0f, l);
    EXPECT_NEAR(got.loss_sum, want.loss_sum, std::max(sum_bound, 1e-12));
    const std::vector<float> loss = d_loss.ToHost();
    for (int64_t r = 0; r < p.rows; ++r) {
      ASSERT_NEAR(loss[r], want_loss[r], 2e-6f * std::max(1.0f, want_loss[r]))
          << "row " << r;
    }
    const std::vector<float> g = in_place ? d_logits.ToHost() : d_grad.ToHost();
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(g[i], want_grad[i], 1e-6f * scale) << "at " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, SoftmaxXentTest,
                         ::testing::Values(Case{0, 10, 1}, Case{1, 1, 1},
                                           Case{5, 3, 1}, Case{64, 10, 5},
                                           Case{333, 1000, 3},
                                           Case{128, 10, 80}));

TEST(SoftmaxXentWorkspaceTest, SizesNeedNoDevice) {
  EXPECT_EQ(SoftmaxCrossEntropyWorkspaceBytes(0), 0u);
  EXPECT_GE(SoftmaxCrossEntropyWorkspaceBytes(100),
            100 * (sizeof(double) + sizeof(int32_t)));
}

}  // namespace
}  // namespace cuda
}  // namespace lockstep
