// The shared security flags: the bearer token's sources and trimming, and
// TLS flag sets read into TlsFiles.
#include "client/tls_flags.h"

#include <stdlib.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"

namespace lockstep {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

ParsedFlags Flags(std::map<std::string, std::string> values) {
  ParsedFlags f;
  f.values = std::move(values);
  return f;
}

TEST(TlsFlagsTest, AddsTheThreeTlsFlags) {
  std::set<std::string> flags = WithTlsFlags({"listen"});
  EXPECT_EQ(flags,
            (std::set<std::string>{"listen", "tls-cert", "tls-key", "tls-ca"}));
}

TEST(TlsFlagsTest, TokenFileIsTrimmedAndMustHoldAToken) {
  const std::string dir = testing::NewTempDir("token");
  testing::WriteStringToFile(dir + "/t", "  abc123 \n\n");
  testing::WriteStringToFile(dir + "/empty", " \t\n");
  absl::StatusOr<std::string> t = ReadTokenFile("--token-file", dir + "/t");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, "abc123");
  absl::Status empty = ReadTokenFile("--token-file", dir + "/empty").status();
  EXPECT_TRUE(absl::IsInvalidArgument(empty)) << empty;
  EXPECT_THAT(empty.message(),
              AllOf(HasSubstr("--token-file"), HasSubstr(dir + "/empty"),
                    HasSubstr("holds no token")));
  absl::Status missing =
      ReadTokenFile("--token-file", dir + "/missing").status();
  EXPECT_TRUE(absl::IsNotFound(missing)) << missing;
  EXPECT_THAT(missing.message(),
              AllOf(HasSubstr("--token-file"), HasSubstr(dir + "/missing")));
}

TEST(TlsFlagsTest, ClientTokenPrefersTheFlagOverTheEnvironment) {
  const std::string dir = testing::NewTempDir("token");
  testing::WriteStringToFile(dir + "/t", "from-file\n");
  setenv("LOCKSTEP_TOKEN", " from-env ", 1);
  EXPECT_EQ(*ClientToken(Flags({})), "from-env");
  EXPECT_EQ(*ClientToken(Flags({{"token-file", dir + "/t"}})), "from-file");
  unsetenv("LOCKSTEP_TOKEN");
  EXPECT_EQ(*ClientToken(Flags({})), "");
}

TEST(TlsFlagsTest, PartialTlsFlagsNameTheMissingOne) {
  absl::StatusOr<TlsFiles> tls = TlsFromFlags(
      Flags({{"tls-key", "k.pem"}, {"tls-ca", "ca.pem"}}), TlsRole::kDaemon);
  EXPECT_TRUE(absl::IsInvalidArgument(tls.status()));
  EXPECT_THAT(tls.status().message(),
              HasSubstr("--tls-key is given but --tls-cert is not"));
  tls = TlsFromFlags(Flags({}), TlsRole::kClient);
  ASSERT_TRUE(tls.ok());
  EXPECT_FALSE(tls->enabled());
}

}  // namespace
}  // namespace lockstep
