// SquareSum: exact against integer arithmetic done by hand, independent of
// order and of how the values are split (the property a sharded optimizer's
// norm needs), through the wire format, and for non-finite values.
#include "core/train/square_sum.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

uint64_t Bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, sizeof(b));
  return b;
}

TEST(SquareSumTest, SmallExactValues) {
  SquareSum s;
  const float x[] = {3.0f, -4.0f, 0.5f, 0.0f};
  s.Add(x, 4);
  EXPECT_EQ(s.Value(), 25.25);
  EXPECT_EQ(SquareSum().Value(), 0.0);
}

TEST(SquareSumTest, ExactWhereADoubleSumIsNot) {
  // One square of 2^30 then 2^20 squares of 2^-40 (2^-20 in all): a double
  // holds 2^30 + 2^-20 (its ulp there is 2^-22), but summing in this order
  // each tiny square is under half an ulp and lost.
  std::vector<float> x(1 << 20, 0x1p-20f);
  x.insert(x.begin(), 0x1p15f);
  SquareSum s;
  s.Add(x.data(), static_cast<int64_t>(x.size()));
  const double exact = 0x1p30 + 0x1p-20;
  EXPECT_EQ(s.Value(), exact);
  double sequential = 0;
  for (float v : x) sequential += static_cast<double>(v) * v;
  EXPECT_EQ(sequential, 0x1p30);
}

TEST(SquareSumTest, IndependentOfOrderAndSplit) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-60, 60);
  std::vector<float> x(300001);
  for (float& v : x) v = std::ldexp(mant(rng), expo(rng));
  x[17] = 1e-42f;  // a denormal
  SquareSum whole;
  whole.Add(x.data(), static_cast<int64_t>(x.size()));
  // Three "ranks" holding uneven parts, summed through the wire in floats.
  const size_t cut1 = 70001, cut2 = 250000;
  std::vector<float> wire(SquareSum::kWireFloats, 0.0f);
  for (auto [b, e] :
       {std::pair<size_t, size_t>{cut2, x.size()}, {0, cut1}, {cut1, cut2}}) {
    SquareSum part;
    part.Add(x.data() + b, static_cast<int64_t>(e - b));
    std::vector<float> w(SquareSum::kWireFloats);
    part.ToWire(w.data());
    for (int i = 0; i < SquareSum::kWireFloats; ++i) wire[i] += w[i];
  }
  EXPECT_EQ(Bits(SquareSum::FromWire(wire.data()).Value()),
            Bits(whole.Value()));
  std::vector<float> shuffled = x;
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  SquareSum other;
  other.Add(shuffled.data(), static_cast<int64_t>(shuffled.size()));
  EXPECT_EQ(Bits(other.Value()), Bits(whole.Value()));
  SquareSum merged;
  SquareSum a, b;
  a.Add(x.data(), 1000);
  b.Add(x.data() + 1000, static_cast<int64_t>(x.size()) - 1000);
  merged.Add(b);
  merged.Add(a);
  EXPECT_EQ(Bits(merged.Value()), Bits(whole.Value()));
  // And it is the true sum to double precision.
  long double ref = 0;
  for (float v : x) ref += static_cast<long double>(v) * v;
  EXPECT_NEAR(whole.Value() / static_cast<double>(ref), 1.0, 1e-15);
}

TEST(SquareSumTest, LargestFloatsDoNotOverflow) {
  std::vector<float> x(1000, std::numeric_limits<float>::max());
  SquareSum s;
  s.Add(x.data(), 1000);
  const double m = std::numeric_limits<float>::max();
  EXPECT_NEAR(s.Value() / (1000.0 * m * m), 1.0, 1e-15);
}

TEST(SquareSumTest, NonFinite) {
  SquareSum s;
  const float inf[] = {1.0f, std::numeric_limits<float>::infinity()};
  s.Add(inf, 2);
  EXPECT_EQ(s.Value(), std::numeric_limits<double>::infinity());
  const float nan[] = {std::nanf("")};
  s.Add(nan, 1);
  EXPECT_TRUE(std::isnan(s.Value()));
  std::vector<float> w(SquareSum::kWireFloats);
  s.ToWire(w.data());
  EXPECT_TRUE(std::isnan(SquareSum::FromWire(w.data()).Value()));
}

}  // namespace
}  // namespace lockstep
