#include "core/fingerprint.h"

#include <xxhash.h>

#include <vector>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(FingerprintTest, HexOfXxh3OverAllBytesInOrder) {
  Param a{"a", Tensor({2}, {1.0f, 2.0f}), Tensor()};
  Param b{"b", Tensor({1}, {3.0f}), Tensor()};
  const float all[] = {1.0f, 2.0f, 3.0f};
  XXH128_hash_t h = XXH3_128bits(all, sizeof(all));
  char want[33];
  snprintf(want, sizeof(want), "%016llx%016llx",
           static_cast<unsigned long long>(h.high64),
           static_cast<unsigned long long>(h.low64));
  const std::string fp = Fingerprint({&a, &b});
  EXPECT_EQ(fp, want);
  EXPECT_EQ(fp.size(), 32u);
  EXPECT_EQ(FingerprintTensors({&a.value, &b.value}), fp);
  EXPECT_NE(Fingerprint({&b, &a}), fp);
  b.value.data()[0] = 3.0000002f;
  EXPECT_NE(Fingerprint({&a, &b}), fp);
}

TEST(FingerprintTest, EmptyIsXxh3OfNothing) {
  Tensor empty({0});
  EXPECT_EQ(FingerprintTensors({}), FingerprintTensors({&empty}));
  EXPECT_EQ(FingerprintTensors({}).size(), 32u);
}

}  // namespace
}  // namespace lockstep
