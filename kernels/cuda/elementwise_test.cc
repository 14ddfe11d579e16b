// The GPU element-wise kernels against kernels/cpu, bit for bit.
#include "kernels/cuda/elementwise.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cuda/cuda_test_util.h"

namespace lockstep {
namespace cuda {
namespace {

struct Shape {
  int64_t rows, cols;
};

class ElementwiseTest : public ::testing::TestWithParam<Shape> {};

TEST_P(ElementwiseTest, BiasAndRelu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const auto [rows, cols] = GetParam();
  const std::vector<float> x = RandomVector(rows * cols, 1, -2.0f, 2.0f);
  const std::vector<float> bias = RandomVector(cols, 2);
  {
    std::vector<float> want = x;
    lockstep::AddBias(rows, cols, bias.data(), want.data());
    DeviceArray<float> y(x), b(bias);
    ASSERT_EQ(cuda::AddBias(rows, cols, b.get(), y.get(), nullptr),
              cudaSuccess);
    ExpectSameBits(want, y.ToHost());
  }
  for (bool with_bias : {true, false}) {
    std::vector<float> want = x;
    BiasActivationForward(rows, cols, with_bias ? bias.data() : nullptr,
                          ActivationKind::kRelu, want.data());
    DeviceArray<float> y(x), b(bias);
    ASSERT_EQ(BiasReluForward(rows, cols, with_bias ? b.get() : nullptr,
                              y.get(), nullptr),
              cudaSuccess);
    ExpectSameBits(want, y.ToHost());
  }
}

TEST_P(ElementwiseTest, ReluBackwardAndBiasGrad) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const auto [rows, cols] = GetParam();
  std::vector<float> y = RandomVector(rows * cols, 3, -1.0f, 1.0f);
  for (float& v : y) v = v < 0 ? 0.0f : v;
  const std::vector<float> dy = RandomVector(rows * cols, 4);
  std::vector<float> want = dy;
  ActivationBackward(rows, cols, ActivationKind::kRelu, y.data(), want.data());
  DeviceArray<float> d_y(y), d_dy(dy);
  ASSERT_EQ(ReluBackward(rows * cols, d_y.get(), d_dy.get(), nullptr),
            cudaSuccess);
  ExpectSameBits(want, d_dy.ToHost());

  std::vector<float> want_bias(cols, 7.0f);
  lockstep::BiasGrad(rows, cols, dy.data(), want_bias.data());
  DeviceArray<float> g(dy), db(std::vector<float>(cols, 7.0f));
  ASSERT_EQ(cuda::BiasGrad(rows, cols, g.get(), db.get(), nullptr),
            cudaSuccess);
  ExpectSameBits(want_bias, db.ToHost());

  // The parallel form (blocks summed side by side, then in order) gives the
  // same bits.
  const int64_t ws = BiasGradWorkspaceFloats(rows, cols);
  EXPECT_EQ(ws, rows > 256 && cols > 0 ? (rows + 255) / 256 * cols : 0);
  DeviceArray<float> work(std::vector<float>(std::max<int64_t>(ws, 1), -1.0f));
  DeviceArray<float> db2(std::vector<float>(cols, 7.0f));
  ASSERT_EQ(cuda::BiasGrad(rows, cols, g.get(), db2.get(), nullptr, work.get()),
            cudaSuccess);
  ExpectSameBits(want_bias, db2.ToHost());
}

// A convolution's bias gradient: 32 filters over 512 * 26 * 26 positions
// (1352 row blocks), through the parallel form, bit for bit.
TEST(BiasGradTest, TallConvolutionShapeMatchesCpuBitForBit) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t rows = 512 * 26 * 26, cols = 32;
  const std::vector<float> dy = RandomVector(rows * cols, 9);
  std::vector<float> want(cols);
  lockstep::BiasGrad(rows, cols, dy.data(), want.data());
  DeviceArray<float> g(dy), db(std::vector<float>(cols, 0.0f));
  DeviceArray<float> work(
      std::vector<float>(BiasGradWorkspaceFloats(rows, cols), 0.0f));
  ASSERT_EQ(cuda::BiasGrad(rows, cols, g.get(), db.get(), nullptr, work.get()),
            cudaSuccess);
  ExpectSameBits(want, db.ToHost());
}

TEST_P(ElementwiseTest, ScaleAndAxpy) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t n = GetParam().rows * GetParam().cols;
  const std::vector<float> x = RandomVector(n, 5), y0 = RandomVector(n, 6);
  std::vector<float> want = y0;
  lockstep::Scale(n, 0.37f, want.data());
  DeviceArray<float> d(y0);
  ASSERT_EQ(cuda::Scale(n, 0.37f, d.get(), nullptr), cudaSuccess);
  ExpectSameBits(want, d.ToHost());

  want = y0;
  lockstep::Axpy(n, -1.3f, x.data(), want.data());
  DeviceArray<float> dx(x), dy(y0);
  ASSERT_EQ(cuda::Axpy(n, -1.3f, dx.get(), dy.get(), nullptr), cudaSuccess);
  ExpectSameBits(want, dy.ToHost());
}

// The 16-bit precisions' rounding: bfloat16 bit for bit the CPU's
// RoundToBf16 (random values, ties, NaN, infinities, the largest floats);
// half by IEEE's rule at its edges (65504 the largest, 65520 and up to
// infinity, ties to even, subnormals down to 2^-24); kNone copies.
TEST(RoundInputsTest, Bf16AsTheCpuAndHalfAtItsEdges) {
  SKIP_WITHOUT_CUDA_DEVICE();
  std::vector<float> x = RandomVector(10000, 9, -1e4f, 1e4f);
  const float specials[] = {
      0.0f,      -0.0f, 1.0f + 0x1p-8f, 1.0f + 0x3p-8f, INFINITY,
      -INFINITY, NAN,   3.4028235e38f,  -3.4028235e38f, 1e-40f};
  x.insert(x.end(), std::begin(specials), std::end(specials));
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> want(n);
  lockstep::RoundToBf16(n, x.data(), want.data());
  DeviceArray<float> dx(x), dy(n);
  ASSERT_EQ(RoundInputs(InputRounding::kBf16, n, dx.get(), dy.get(), nullptr),
            cudaSuccess);
  ExpectSameBits(want, dy.ToHost());
  ASSERT_EQ(RoundInputs(InputRounding::kNone, n, dx.get(), dy.get(), nullptr),
            cudaSuccess);
  ExpectSameBits(x, dy.ToHost());

  const std::vector<float> half_in = {
      65504.0f,        65519.0f, 65520.0f, -70000.0f, 1.0f + 0x1p-11f,
      1.0f + 0x3p-11f, 0x1p-25f, 0x3p-26f, 0.1f};
  const std::vector<float> half_want = {65504.0f,  65504.0f, INFINITY,
                                        -INFINITY, 1.0f,     1.0f + 0x1p-9f,
                                        0.0f,      0x1p-24f, 0.0999755859375f};
  DeviceArray<float> h(half_in);
  ASSERT_EQ(RoundInputs(InputRounding::kFp16, half_in.size(), h.get(), h.get(),
                        nullptr),
            cudaSuccess);
  EXPECT_EQ(h.ToHost(), half_want);
}

// The 16-bit GEMMs' operands (kernels/cuda/gemm.h): bfloat16 bits are the
// high half of RoundToBf16's float, half bits IEEE's at its edges; a
// strided view is packed.
TEST(RoundInputsTest, SixteenBitsAreTheRoundedValues) {
  SKIP_WITHOUT_CUDA_DEVICE();
  std::vector<float> x = RandomVector(5000, 10, -1e4f, 1e4f);
  x.insert(x.end(), {0.0f, -0.0f, 1.0f + 0x1p-8f, INFINITY, NAN, 1e-40f});
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> rounded(n);
  lockstep::RoundToBf16(n, x.data(), rounded.data());
  std::vector<uint16_t> want(n);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &rounded[i], sizeof(bits));
    want[i] = static_cast<uint16_t>(bits >> 16);
  }
  DeviceArray<float> dx(x);
  DeviceArray<uint16_t> dy(n);
  ASSERT_EQ(ToSixteenBits(InputRounding::kBf16, 1, 1, n, dx.get(), n, 0,
                          dy.get(), nullptr),
            cudaSuccess);
  EXPECT_EQ(dy.ToHost(), want);
  // A strided view packed: 2 matrices of 3 x 4, row stride 7, 50 apart.
  DeviceArray<uint16_t> packed(24);
  ASSERT_EQ(ToSixteenBits(InputRounding::kBf16, 2, 3, 4, dx.get(), 7, 50,
                          packed.get(), nullptr),
            cudaSuccess);
  std::vector<uint16_t> want_packed;
  for (int64_t mat = 0; mat < 2; ++mat) {
    for (int64_t r = 0; r < 3; ++r) {
      for (int64_t c = 0; c < 4; ++c) {
        want_packed.push_back(want[mat * 50 + r * 7 + c]);
      }
    }
  }
  EXPECT_EQ(packed.ToHost(), want_packed);

  const std::vector<float> half_in = {65504.0f,        65520.0f, -70000.0f,
                                      1.0f + 0x3p-11f, 0x3p-26f, 0.1f};
  const std::vector<uint16_t> half_bits = {0x7bff, 0x7c00, 0xfc00,
                                           0x3c02, 0x0001, 0x2e66};
  DeviceArray<float> h(half_in);
  DeviceArray<uint16_t> hb(half_in.size());
  ASSERT_EQ(ToSixteenBits(InputRounding::kFp16, 1, 1, half_in.size(), h.get(),
                          half_in.size(), 0, hb.get(), nullptr),
            cudaSuccess);
  EXPECT_EQ(hb.ToHost(), half_bits);
  EXPECT_EQ(ToSixteenBits(InputRounding::kNone, 1, 1, 1, h.get(), 1, 0,
                          hb.get(), nullptr),
            cudaErrorInvalidValue);
}

INSTANTIATE_TEST_SUITE_P(Shapes, ElementwiseTest,
                         ::testing::Values(Shape{0, 5}, Shape{1, 1},
                                           Shape{3, 7}, Shape{257, 10},
                                           Shape{1000, 37}, Shape{64, 4096}));

}  // namespace
}  // namespace cuda
}  // namespace lockstep
