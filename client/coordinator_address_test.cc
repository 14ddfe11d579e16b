#include "client/coordinator_address.h"

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

// The same cases as client/python/tests/test_errors.py's.
TEST(CoordinatorAddressTest, AddsTheDefaultPortAndDropsAPlainScheme) {
  const std::vector<std::pair<std::string, std::string>> ok = {
      {"127.0.0.1:7071", "127.0.0.1:7071"},
      {"127.0.0.1", "127.0.0.1:7070"},
      {" chief ", "chief:7070"},
      {"http://chief:9000", "chief:9000"},
      {"http://chief:9000/", "chief:9000"},
      {"grpc://chief", "chief:7070"},
      {"[::1]:7071", "[::1]:7071"},
      {"[::1]", "[::1]:7070"},
      {"::1", "[::1]:7070"},
  };
  for (const auto& [in, want] : ok) {
    absl::StatusOr<std::string> got = NormalizeCoordinatorAddress(in);
    ASSERT_TRUE(got.ok()) << in << ": " << got.status();
    EXPECT_EQ(*got, want) << in;
  }
}

TEST(CoordinatorAddressTest, RefusesWhatIsNotAnAddressSayingWhy) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"https://chief:7070", "--tls-ca for TLS, not a scheme"},
      {"ftp://chief", "unknown scheme \"ftp\""},
      {"http://chief:7070/jobs", "without a path"},
      {"chief:7070/jobs", "without a path"},
      {"chief:0", "a port from 1 to 65535"},
      {"chief:70000", "a port from 1 to 65535"},
      {"chief:http", "a port from 1 to 65535"},
      {"", "empty"},
      {":7070", "no host"},
  };
  for (const auto& [in, why] : bad) {
    absl::StatusOr<std::string> got = NormalizeCoordinatorAddress(in);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << in;
    EXPECT_THAT(std::string(got.status().message()), ::testing::HasSubstr(why))
        << in;
    EXPECT_THAT(std::string(got.status().message()),
                ::testing::StartsWith("coordinator address \"" + in + "\": "));
  }
}

// The daemons' --listen and --advertise: a port from 0 (any free one),
// the host alone kept apart so each daemon picks its default.
TEST(CoordinatorAddressTest, ParsesHostAndPortForTheDaemons) {
  absl::StatusOr<HostPort> hp = ParseHostPort(" 0.0.0.0:0 ", "--listen", 0);
  ASSERT_TRUE(hp.ok()) << hp.status();
  EXPECT_EQ(hp->host, "0.0.0.0");
  EXPECT_EQ(hp->port, 0);
  hp = ParseHostPort("127.0.0.1", "--listen", 0);
  ASSERT_TRUE(hp.ok());
  EXPECT_FALSE(hp->port.has_value());
  EXPECT_EQ(hp->With(7070), "127.0.0.1:7070");
  hp = ParseHostPort("fe80::1", "--advertise", 0);
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->host, "[fe80::1]");
  EXPECT_EQ(ParseHostPort("[::1]:65535", "--listen", 0)->With(1),
            "[::1]:65535");
  const absl::Status bad =
      ParseHostPort("h:65536", "--listen \"h:65536\"", 0).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(),
            "--listen \"h:65536\": give host:port with a port from 0 to 65535");
  EXPECT_EQ(ParseHostPort("h:0", "x", 1).status().message(),
            "x: give host:port with a port from 1 to 65535");
}

// Coordinators in standby behind etcd: a list, each entry normalized; the
// error names the entry that is wrong.
TEST(CoordinatorAddressTest, NormalizesAListOfCoordinators) {
  absl::StatusOr<std::string> got =
      NormalizeCoordinatorAddresses("a, http://b:7071,[::1]");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "a:7070,b:7071,[::1]:7070");
  EXPECT_EQ(NormalizeCoordinatorAddresses("a,,b").status().message(),
            "coordinator address \"\": empty; give host:port");
  EXPECT_EQ(NormalizeCoordinatorAddresses("a,b:0").status().message(),
            NormalizeCoordinatorAddress("b:0").status().message());
}

}  // namespace
}  // namespace lockstep
