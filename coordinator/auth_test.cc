// The bearer-token comparison behind JobService authorization.
#include "coordinator/auth.h"

#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(CheckBearerTest, AcceptsOnlyTheExactToken) {
  const std::string token = "s3cret-token";
  const std::string good = "Bearer s3cret-token";
  const std::string lower = "bearer s3cret-token";
  EXPECT_EQ(CheckBearer(&good, token), BearerCheck::kOk);
  EXPECT_EQ(CheckBearer(&lower, token), BearerCheck::kOk);
  for (const std::string wrong :
       {"Bearer s3cret-toke", "Bearer s3cret-token2", "Bearer S3cret-token",
        "Bearer ", "Bearer x"}) {
    EXPECT_EQ(CheckBearer(&wrong, token), BearerCheck::kWrong) << wrong;
  }
}

TEST(CheckBearerTest, NoHeaderOrAnotherSchemeIsMissing) {
  EXPECT_EQ(CheckBearer(nullptr, "t"), BearerCheck::kMissing);
  const std::string basic = "Basic dXNlcjpwYXNz";
  EXPECT_EQ(CheckBearer(&basic, "t"), BearerCheck::kMissing);
}

}  // namespace
}  // namespace lockstep
