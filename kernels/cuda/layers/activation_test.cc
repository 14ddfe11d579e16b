// The GPU activations against kernels/cpu/elementwise: linear and ReLU
// forward and every backward bit for bit; tanh, sigmoid and softmax forward
// within 4 ulp-ish (2e-6 absolute on values in [-1, 1]), since CUDA's
// tanhf/expf are not glibc's.
#include "kernels/cuda/layers/activation.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cuda/cuda_test_util.h"

namespace lockstep {
namespace cuda {
namespace {

struct Case {
  int64_t rows, cols;
};

const ActivationKind kActs[] = {ActivationKind::kLinear, ActivationKind::kRelu,
                                ActivationKind::kTanh, ActivationKind::kSigmoid,
                                ActivationKind::kSoftmax, ActivationKind::kRelu6};

bool ExactForward(ActivationKind act) {
  return act == ActivationKind::kLinear || act == ActivationKind::kRelu ||
         act == ActivationKind::kRelu6;
}

void ExpectNear(const std::vector<float>& want, const std::vector<float>& got,
                float tol, const char* what) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(want[i], got[i], tol) << what << " at " << i;
  }
}

class ActivationTest : public ::testing::TestWithParam<Case> {};

TEST_P(ActivationTest, ForwardMatchesCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const auto [rows, cols] = GetParam();
  // Past 6, for relu6's upper clip.
  const std::vector<float> x = RandomVector(rows * cols, 1, -3.0f, 8.0f);
  const std::vector<float> bias = RandomVector(cols, 2);
  for (ActivationKind act : kActs) {
    for (bool with_bias : {true, false}) {
      SCOPED_TRACE(::testing::Message()
                   << "act " << static_cast<int>(act) << " bias " << with_bias);
      std::vector<float> want = x;
      lockstep::BiasActivationForward(
          rows, cols, with_bias ? bias.data() : nullptr, act, want.data());
      DeviceArray<float> y(x), b(bias);
      ASSERT_EQ(
          cuda::BiasActivationForward(rows, cols, with_bias ? b.get() : nullptr,
                                      act, y.get(), nullptr),
          cudaSuccess);
      if (ExactForward(act)) {
        ExpectSameBits(want, y.ToHost(), "forward");
      } else {
        ExpectNear(want, y.ToHost(), 2e-6f, "forward");
      }
    }
  }
}

TEST_P(ActivationTest, BackwardAndBiasGradMatchCpuBitForBit) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const auto [rows, cols] = GetParam();
  const std::vector<float> dy0 = RandomVector(rows * cols, 3);
  for (ActivationKind act : kActs) {
    // A genuine activation output (the CPU's forward), so the backward sees
    // realistic values, e.g. softmax rows that sum to 1.
    std::vector<float> y = RandomVector(rows * cols, 4, -2.0f, 7.0f);
    lockstep::BiasActivationForward(rows, cols, nullptr, act, y.data());
    for (bool with_bias : {true, false}) {
      SCOPED_TRACE(::testing::Message()
                   << "act " << static_cast<int>(act) << " bias " << with_bias);
      std::vector<float> want = dy0;
      std::vector<float> want_db(cols, -1.0f);
      lockstep::ActivationBackwardBiasGrad(
          rows, cols, act, y.data(), want.data(),
          with_bias ? want_db.data() : nullptr);
      DeviceArray<float> dy(dy0), yd(y), db(std::vector<float>(cols, -1.0f));
      ASSERT_EQ(cuda::ActivationBackwardBiasGrad(
                    rows, cols, act, yd.get(), dy.get(),
                    with_bias ? db.get() : nullptr, nullptr),
                cudaSuccess);
      ExpectSameBits(want, dy.ToHost(), "dy");
      ExpectSameBits(want_db, db.ToHost(), "dbias");
    }
  }
}

// Empty, one row, uneven, more than one 256-row bias block, wide rows.
INSTANTIATE_TEST_SUITE_P(Shapes, ActivationTest,
                         ::testing::Values(Case{0, 5}, Case{1, 1}, Case{1, 10},
                                           Case{7, 13}, Case{300, 10},
                                           Case{513, 64}, Case{3, 1000}));

}  // namespace
}  // namespace cuda
}  // namespace lockstep
