// GPU depthwise convolution against kernels/cpu/depthwise.h, bit for bit:
// outputs, kernel gradients and input gradients, for strides 1 and 2, both
// paddings, multipliers 1 and 2, and more rows than one gradient block.
#include "kernels/cuda/layers/depthwise.h"

#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/depthwise.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cuda/cuda_test_util.h"

namespace lockstep {
namespace cuda {
namespace {

struct Case {
  int64_t n, h, w, c, k, stride, mult;
  bool same;
};

class DepthwiseTest : public ::testing::TestWithParam<Case> {};

TEST_P(DepthwiseTest, ForwardAndBackwardMatchCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const Case p = GetParam();
  const Conv2DGeometry g = Conv2DGeometry::Make(
      p.n, p.h, p.w, p.c, p.k, p.k, p.c * p.mult, p.stride, p.stride, p.same);
  const std::vector<float> x = RandomVector(p.n * p.h * p.w * p.c, 11);
  const std::vector<float> k = RandomVector(p.k * p.k * g.filters, 12);
  const std::vector<float> bias = RandomVector(g.filters, 13);
  const std::vector<float> dy = RandomVector(g.rows() * g.filters, 14);
  std::vector<float> want_y(g.rows() * g.filters), want_dk(k.size()),
      want_dx(x.size()), partials;
  lockstep::DepthwiseConv2DForward(g, x.data(), k.data(), bias.data(),
                                   want_y.data());
  lockstep::DepthwiseConv2DBackward(g, x.data(), k.data(), dy.data(),
                                    want_dk.data(), want_dx.data(), &partials);
  DeviceArray<float> dx_in(x), dk_in(k), db(bias), ddy(dy),
      y(want_y.size()), dk(k.size()), dx(x.size());
  ASSERT_EQ(cuda::DepthwiseConv2DForward(g, dx_in.get(), dk_in.get(),
                                         db.get(), y.get(), nullptr),
            cudaSuccess);
  ASSERT_EQ(cuda::DepthwiseConv2DBackward(g, dx_in.get(), dk_in.get(),
                                          ddy.get(), dk.get(), dx.get(),
                                          nullptr),
            cudaSuccess);
  ExpectSameBits(want_y, y.ToHost(), "y");
  ExpectSameBits(want_dk, dk.ToHost(), "dkernel");
  ExpectSameBits(want_dx, dx.ToHost(), "dx");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DepthwiseTest,
    ::testing::Values(Case{2, 7, 6, 5, 3, 1, 1, true},
                      Case{2, 8, 7, 4, 3, 2, 1, true},
                      Case{1, 9, 9, 3, 3, 2, 1, false},
                      Case{2, 5, 6, 3, 3, 1, 2, false},
                      Case{4, 28, 28, 32, 3, 1, 1, true},  // 12 row blocks
                      Case{1, 1, 1, 4, 3, 1, 1, true}));

}  // namespace
}  // namespace cuda
}  // namespace lockstep
