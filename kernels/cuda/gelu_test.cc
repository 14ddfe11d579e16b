// The GPU GELU against the CPU kernel (whose erf is an approximation within
// 2e-7): forward and backward within 2e-6 over [-8, 8] and at the extremes.
#include "kernels/cuda/gelu.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cuda/cuda_test_util.h"

namespace lockstep {
namespace cuda {
namespace {

TEST(GeluTest, MatchesTheCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  std::vector<float> x;
  for (int i = -4000; i <= 4000; ++i) x.push_back(i * 0.002f);
  for (float v : {-90.0f, -20.0f, 20.0f, 1e6f, -1e6f}) x.push_back(v);
  std::vector<float> dy(x.size());
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = 0.5f + 0.001f * (i % 7);
  const int64_t n = static_cast<int64_t>(x.size());
  DeviceArray<float> dx_in(x), dy_in(dy), y(x.size()), dx(x.size());
  ASSERT_EQ(GeluForward(n, dx_in.get(), y.get(), nullptr), cudaSuccess);
  ASSERT_EQ(GeluBackward(n, dx_in.get(), dy_in.get(), dx.get(), nullptr),
            cudaSuccess);
  std::vector<float> want_y(x.size()), want_dx(x.size());
  lockstep::GeluForward(n, x.data(), want_y.data());
  lockstep::GeluBackward(n, x.data(), dy.data(), want_dx.data());
  const std::vector<float> got_y = y.ToHost(), got_dx = dx.ToHost();
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(got_y[i], want_y[i], 2e-6 * (1 + std::fabs(want_y[i])))
        << "x=" << x[i];
    EXPECT_NEAR(got_dx[i], want_dx[i], 2e-6) << "x=" << x[i];
  }
  EXPECT_EQ(GeluForward(0, nullptr, nullptr, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace cuda
}  // namespace lockstep
