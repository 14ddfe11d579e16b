#include "kernels/cpu/elementwise.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
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
    case ActivationKind::kRelu6:
      return v > 6 ? 6 : v > 0 ? v : 0;
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
  for (ActivationKind act :
       {ActivationKind::kLinear, ActivationKind::kRelu, ActivationKind::kTanh,
        ActivationKind::kSigmoid, ActivationKind::kRelu6}) {
    // Past 6 too, for relu6's upper clip.
    std::vector<float> z = RandomVector(rows * cols, 4, -3, 8);
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
        if ((act == ActivationKind::kRelu || act == ActivationKind::kRelu6) &&
            (std::fabs(pre) < 2 * h || std::fabs(pre - 6) < 2 * h)) {
          continue;  // at a kink
        }
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

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}
uint16_t Bf16Of(float x) {
  uint16_t h;
  FloatToBf16(1, &x, &h);
  return h;
}

TEST(Bfloat16Test, RoundsToNearestTiesToEven) {
  EXPECT_EQ(Bf16Of(1.0f), 0x3f80);
  EXPECT_EQ(Bf16Of(-2.0f), 0xc000);
  EXPECT_EQ(Bf16Of(0.0f), 0x0000);
  EXPECT_EQ(Bf16Of(-0.0f), 0x8000);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even 1.
  EXPECT_EQ(Bf16Of(FromBits(0x3f808000)), 0x3f80);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up.
  EXPECT_EQ(Bf16Of(FromBits(0x3f818000)), 0x3f82);
  // Just above and below a half: nearest.
  EXPECT_EQ(Bf16Of(FromBits(0x3f808001)), 0x3f81);
  EXPECT_EQ(Bf16Of(FromBits(0x3f807fff)), 0x3f80);
  // pi = 0x40490fdb rounds down to 3.140625.
  EXPECT_EQ(Bf16Of(3.14159265f), 0x4049);
  // Subnormals round like any other value: 2^-149 is below half of
  // bfloat16's smallest subnormal (2^-133), so it rounds to zero.
  EXPECT_EQ(Bf16Of(FromBits(0x00000001)), 0x0000);
  EXPECT_EQ(Bf16Of(FromBits(0x00018000)), 0x0002);  // a tie, to even
}

TEST(Bfloat16Test, InfinityNanAndOverflow) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(Bf16Of(inf), 0x7f80);
  EXPECT_EQ(Bf16Of(-inf), 0xff80);
  // The largest float is past bfloat16's largest finite plus half an ulp.
  EXPECT_EQ(Bf16Of(std::numeric_limits<float>::max()), 0x7f80);
  // bfloat16's largest finite value stays.
  EXPECT_EQ(Bf16Of(FromBits(0x7f7f0000)), 0x7f7f);
  // A NaN whose payload sits only in the low half must not become infinity.
  const uint16_t nan_low = Bf16Of(FromBits(0x7f800001));
  EXPECT_EQ(nan_low & 0x7f80, 0x7f80);
  EXPECT_NE(nan_low & 0x007f, 0);
  const uint16_t qnan = Bf16Of(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(qnan, 0x7fc0);
}

TEST(Bfloat16Test, WidenAndAddReadUnalignedBytes) {
  // Three bfloat16 values at an odd offset: 1.5, -0.25, 3.140625.
  const uint16_t values[3] = {0x3fc0, 0xbe80, 0x4049};
  char bytes[1 + sizeof(values)];
  std::memcpy(bytes + 1, values, sizeof(values));
  float out[3] = {9, 9, 9};
  Bf16BytesToFloat(3, bytes + 1, out);
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -0.25f);
  EXPECT_EQ(out[2], 3.140625f);
  float sum[3] = {1.0f, 1.0f, 0.5f};
  AddBf16FromBytes(3, bytes + 1, sum);
  EXPECT_EQ(sum[0], 2.5f);
  EXPECT_EQ(sum[1], 0.75f);
  EXPECT_EQ(sum[2], 3.640625f);
  // A long vector (the vectorised path) agrees with the one-at-a-time one.
  std::vector<float> x = RandomVector(10007, 3);
  std::vector<uint16_t> h(x.size());
  FloatToBf16(static_cast<int64_t>(x.size()), x.data(), h.data());
  std::vector<float> widened(x.size());
  Bf16BytesToFloat(static_cast<int64_t>(x.size()),
                   reinterpret_cast<const char*>(h.data()), widened.data());
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(h[i], Bf16Of(x[i])) << i;
    uint32_t bits;
    std::memcpy(&bits, &widened[i], sizeof(bits));
    ASSERT_EQ(bits, static_cast<uint32_t>(h[i]) << 16) << i;
    // Relative rounding error of at most 2^-8 (half an ulp of 8 bits).
    ASSERT_LE(std::fabs(widened[i] - x[i]), std::ldexp(std::fabs(x[i]), -8))
        << i;
  }
}

// RoundToBf16 keeps FloatToBf16's bfloat16 as a float32, in place too.
TEST(Bfloat16Test, RoundToBf16IsFloatToBf16Widened) {
  std::vector<float> x = RandomVector(10007, 4);
  x[0] = FromBits(0x3f808000);               // a tie: down to 1
  x[1] = FromBits(0x7f800001);               // a NaN stays one
  x[2] = std::numeric_limits<float>::max();  // past the largest: infinity
  std::vector<float> y(x.size()), in_place = x;
  RoundToBf16(static_cast<int64_t>(x.size()), x.data(), y.data());
  RoundToBf16(static_cast<int64_t>(x.size()), in_place.data(), in_place.data());
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t bits, again;
    std::memcpy(&bits, &y[i], sizeof(bits));
    std::memcpy(&again, &in_place[i], sizeof(again));
    ASSERT_EQ(bits, static_cast<uint32_t>(Bf16Of(x[i])) << 16) << i;
    ASSERT_EQ(again, bits) << i;
  }
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_TRUE(std::isnan(y[1]));
  EXPECT_TRUE(std::isinf(y[2]));
}

}  // namespace
}  // namespace lockstep
