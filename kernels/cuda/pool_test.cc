// GPU max and average pooling against kernels/cpu, bit for bit, over disjoint,
// overlapping, gapped and padded windows.
#include "kernels/cuda/pool.h"

#include <array>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/pool.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cuda/cuda_test_util.h"

namespace lockstep {
namespace cuda {
namespace {

struct Case {
  int64_t n, h, w, c, ph, pw, sh, sw;
  int64_t pad_h = 0, pad_w = 0;
};

class PoolTest : public ::testing::TestWithParam<Case> {};

TEST_P(PoolTest, ForwardAndBackwardMatchCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const Case p = GetParam();
  const Pool2DGeometry g = Pool2DGeometry::Make(p.n, p.h, p.w, p.c, p.ph, p.pw,
                                                p.sh, p.sw, p.pad_h, p.pad_w);
  std::vector<float> x = RandomVector(g.batch * g.in_size(), 21);
  for (size_t i = 0; i < x.size(); i += 5) x[i] = 0.5f;  // ties
  const int64_t out_n = g.batch * g.out_size();
  std::vector<float> want_y(out_n);
  std::vector<int32_t> want_arg(out_n);
  lockstep::MaxPool2DForward(g, x.data(), want_y.data(), want_arg.data());

  DeviceArray<float> d_x(x), d_y(out_n);
  DeviceArray<int32_t> d_arg(out_n);
  ASSERT_EQ(
      cuda::MaxPool2DForward(g, d_x.get(), d_y.get(), d_arg.get(), nullptr),
      cudaSuccess);
  ExpectSameBits(want_y, d_y.ToHost());
  ExpectSameBits(want_arg, d_arg.ToHost());

  std::vector<float> dy = RandomVector(out_n, 22);
  if (!dy.empty()) dy[0] = -0.0f;
  std::vector<float> want_dx(x.size());
  lockstep::MaxPool2DBackward(g, dy.data(), want_arg.data(), want_dx.data());
  DeviceArray<float> d_dy(dy), d_dx(std::vector<float>(x.size(), 9.0f));
  ASSERT_EQ(
      cuda::MaxPool2DBackward(g, d_dy.get(), d_arg.get(), d_dx.get(), nullptr),
      cudaSuccess);
  ExpectSameBits(want_dx, d_dx.ToHost());
}

// Average pooling, pads counted and not: the CPU's bits both ways.
TEST_P(PoolTest, AverageMatchesCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const Case p = GetParam();
  const Pool2DGeometry g = Pool2DGeometry::Make(p.n, p.h, p.w, p.c, p.ph, p.pw,
                                                p.sh, p.sw, p.pad_h, p.pad_w);
  const std::vector<float> x = RandomVector(g.batch * g.in_size(), 23);
  const int64_t out_n = g.batch * g.out_size();
  const std::vector<float> dy = RandomVector(out_n, 24);
  for (bool include : {true, false}) {
    std::vector<float> want_y(out_n), want_dx(x.size());
    lockstep::AvgPool2DForward(g, include, x.data(), want_y.data());
    lockstep::AvgPool2DBackward(g, include, dy.data(), want_dx.data());
    DeviceArray<float> d_x(x), d_y(out_n), d_dy(dy),
        d_dx(std::vector<float>(x.size(), 9.0f));
    ASSERT_EQ(cuda::AvgPool2DForward(g, include, d_x.get(), d_y.get(), nullptr),
              cudaSuccess);
    ASSERT_EQ(
        cuda::AvgPool2DBackward(g, include, d_dy.get(), d_dx.get(), nullptr),
        cudaSuccess);
    ExpectSameBits(want_y, d_y.ToHost());
    ExpectSameBits(want_dx, d_dx.ToHost());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Geometries, PoolTest,
    ::testing::Values(Case{2, 4, 4, 3, 2, 2, 2, 2},  // disjoint
                      Case{3, 7, 5, 5, 2, 2, 2, 2},  // odd sizes: gaps
                      Case{2, 6, 6, 4, 3, 3, 1, 1},  // overlapping
                      Case{2, 9, 8, 3, 3, 2, 2, 1},  // overlap on one axis
                      Case{1, 5, 5, 2, 2, 2, 3, 3},  // stride > pool
                      Case{0, 4, 4, 3, 2, 2, 2, 2},  // empty batch
                      Case{1, 1, 1, 1, 2, 2, 2, 2},  // pool larger than input
                      Case{16, 28, 28, 32, 2, 2, 2, 2},  // a CNN layer
                      // PyTorch's padded windows (ResNet's stem).
                      Case{2, 16, 16, 8, 3, 3, 2, 2, 1, 1},
                      Case{1, 7, 6, 5, 3, 3, 2, 2, 1, 1},
                      Case{2, 6, 6, 4, 2, 2, 2, 2, 1, 0}));

// Global average pooling sums each channel in the CPU's order: the same
// bits, forward and backward.
TEST(GlobalAvgPoolTest, ForwardAndBackwardMatchCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (const auto& [n, hw, c] : std::vector<std::array<int64_t, 3>>{
           {2, 7 * 7, 1280}, {3, 3 * 5, 7}, {0, 4, 4}, {16, 1, 32}}) {
    std::vector<float> x = RandomVector(n * hw * c, 31);
    std::vector<float> want_y(n * c);
    lockstep::GlobalAvgPool2DForward(n, hw, c, x.data(), want_y.data());
    DeviceArray<float> d_x(x), d_y(n * c);
    ASSERT_EQ(cuda::GlobalAvgPool2DForward(n, hw, c, d_x.get(), d_y.get(),
                                           nullptr),
              cudaSuccess);
    ExpectSameBits(want_y, d_y.ToHost());
    std::vector<float> dy = RandomVector(n * c, 32);
    std::vector<float> want_dx(x.size());
    lockstep::GlobalAvgPool2DBackward(n, hw, c, dy.data(), want_dx.data());
    DeviceArray<float> d_dy(dy), d_dx(std::vector<float>(x.size(), 9.0f));
    ASSERT_EQ(cuda::GlobalAvgPool2DBackward(n, hw, c, d_dy.get(), d_dx.get(),
                                            nullptr),
              cudaSuccess);
    ExpectSameBits(want_dx, d_dx.ToHost());
  }
}

}  // namespace
}  // namespace cuda
}  // namespace lockstep
