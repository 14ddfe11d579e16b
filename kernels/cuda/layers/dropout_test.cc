// The GPU dropout against kernels/cpu/dropout.h, bit for bit: the same mask
// from the same seed (forward and backward), in place and out of place.
#include "kernels/cuda/layers/dropout.h"

#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cuda/cuda_test_util.h"

namespace lockstep {
namespace cuda {
namespace {

struct Case {
  int64_t n;
  float rate;
  uint64_t seed;
};

class DropoutTest : public ::testing::TestWithParam<Case> {};

TEST_P(DropoutTest, MatchesCpuBitForBit) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const auto [n, rate, seed] = GetParam();
  const std::vector<float> x = RandomVector(n, 1);
  std::vector<float> want(n), want_dx(n);
  lockstep::DropoutForward(n, rate, seed, x.data(), want.data());
  lockstep::DropoutBackward(n, rate, seed, x.data(), want_dx.data());
  {
    DeviceArray<float> xd(x), y(n);
    ASSERT_EQ(cuda::DropoutForward(n, rate, seed, xd.get(), y.get(), nullptr),
              cudaSuccess);
    ExpectSameBits(want, y.ToHost());
  }
  {
    DeviceArray<float> d(x);  // in place, as the model's backward
    ASSERT_EQ(cuda::DropoutBackward(n, rate, seed, d.get(), d.get(), nullptr),
              cudaSuccess);
    ExpectSameBits(want_dx, d.ToHost());
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, DropoutTest,
                         ::testing::Values(Case{0, 0.5f, 1}, Case{1, 0.5f, 2},
                                           Case{1000, 0.0f, 3},
                                           Case{4097, 0.25f, 0xDEADBEEFCAFEull},
                                           Case{100000, 0.5f, ~0ull},
                                           Case{77, 0.9f, 42}));

}  // namespace
}  // namespace cuda
}  // namespace lockstep
