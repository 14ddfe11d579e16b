#include "base/crc32c.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

using crc32c_internal::ExtendPortable;
using crc32c_internal::ExtendSse42;
using crc32c_internal::HaveSse42;

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xff), inc(32), dec(32);
  for (int i = 0; i < 32; ++i) {
    inc[i] = i;
    dec[i] = 31 - i;
  }
  // RFC 3720 B.4 test vectors.
  EXPECT_EQ(Crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(inc.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(dec.data(), 32), 0x113FDB5Cu);
  EXPECT_EQ(Crc32c(nullptr, 0), 0u);
  EXPECT_EQ(Crc32c("a", 1), 0xC1D04330u);
}

TEST(Crc32cTest, PortableMatchesKnownVectors) {
  std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(ExtendPortable(0, "123456789", 9), 0xE3069283u);
  EXPECT_EQ(ExtendPortable(0, zeros.data(), 32), 0x8A9136AAu);
}

TEST(Crc32cTest, BothPathsAgree) {
  if (!HaveSse42()) GTEST_SKIP() << "CPU has no SSE4.2";
  std::mt19937 rng(7);
  std::vector<uint8_t> buf(4099);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t off : {0, 1, 3, 7}) {
    for (size_t n : {0, 1, 7, 8, 9, 15, 16, 100, 4000}) {
      EXPECT_EQ(ExtendPortable(0, buf.data() + off, n),
                ExtendSse42(0, buf.data() + off, n))
          << "off " << off << " n " << n;
      EXPECT_EQ(ExtendPortable(0x12345678, buf.data() + off, n),
                ExtendSse42(0x12345678, buf.data() + off, n));
    }
  }
}

TEST(Crc32cTest, ExtendEqualsWhole) {
  const std::string s = "The quick brown fox jumps over the lazy dog";
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    uint32_t a = Crc32c(s.data(), cut);
    EXPECT_EQ(Crc32cExtend(a, s.data() + cut, s.size() - cut),
              Crc32c(s.data(), s.size()));
  }
}

TEST(Crc32cTest, MaskRoundTrip) {
  for (uint32_t c : {0u, 1u, 0xE3069283u, 0xffffffffu, 0x80000000u}) {
    EXPECT_EQ(UnmaskCrc32c(MaskCrc32c(c)), c);
    if (c != 0) {
      EXPECT_NE(MaskCrc32c(c), c);
    }
  }
  EXPECT_EQ(MaskCrc32c(0), 0xa282ead8u);
}

}  // namespace
}  // namespace lockstep
