// The vectorized GELU against std::erf / std::exp in double: forward and
// derivative within 3e-7 absolute over [-10, 10], exact limits far out,
// and any thread count giving the same bytes.
#include "kernels/cpu/gelu.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

double Gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double GeluPrime(double x) {
  return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) +
         x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}

TEST(GeluTest, MatchesTheErfForm) {
  for (int i = -100000; i <= 100000; ++i) {
    const float x = i * 1e-4f;
    ASSERT_NEAR(GeluValue(x), Gelu(x), 3e-7 * (1 + std::fabs(x))) << x;
    ASSERT_NEAR(GeluDerivative(x), GeluPrime(x), 3e-7) << x;
  }
  EXPECT_EQ(GeluValue(-100.0f), -0.0f);
  EXPECT_EQ(GeluValue(100.0f), 100.0f);
  EXPECT_EQ(GeluValue(0.0f), 0.0f);
  EXPECT_NEAR(GeluDerivative(0.0f), 0.5f, 1e-7);
}

TEST(GeluTest, ArraysAndThreads) {
  std::vector<float> x(50001);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -6.0f + 12.0f * i / x.size();
  std::vector<float> dy(x.size(), 2.0f);
  std::vector<std::vector<float>> ys, dxs;
  for (int threads : {1, 2}) {
    SetNumThreads(threads);
    std::vector<float> y(x.size()), dx(x.size());
    GeluForward(static_cast<int64_t>(x.size()), x.data(), y.data());
    GeluBackward(static_cast<int64_t>(x.size()), x.data(), dy.data(),
                 dx.data());
    for (size_t i = 0; i < x.size(); i += 97) {
      ASSERT_EQ(y[i], GeluValue(x[i]));
      ASSERT_EQ(dx[i], 2.0f * GeluDerivative(x[i]));
    }
    ys.push_back(y);
    dxs.push_back(dx);
  }
  EXPECT_EQ(ys[0], ys[1]);
  EXPECT_EQ(dxs[0], dxs[1]);
  // In place.
  std::vector<float> z = x;
  GeluForward(static_cast<int64_t>(z.size()), z.data(), z.data());
  EXPECT_EQ(z, ys[0]);
}

}  // namespace
}  // namespace lockstep
