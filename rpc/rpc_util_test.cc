// The gRPC status adapter keeps codes and adds the caller's context.
#include "rpc/rpc_util.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;

TEST(RpcUtilTest, KeepsCodeAndAddsContext) {
  absl::Status s = FromGrpc(
      grpc::Status(grpc::StatusCode::NOT_FOUND, "no job \"x\""), "GetJob");
  EXPECT_TRUE(absl::IsNotFound(s));
  EXPECT_EQ(s.message(), "GetJob: no job \"x\"");
}

TEST(RpcUtilTest, UnavailableSaysPeerUnreachable) {
  absl::Status s =
      FromGrpc(grpc::Status(grpc::StatusCode::UNAVAILABLE, "connect failed"),
               "Register with 127.0.0.1:1");
  EXPECT_TRUE(absl::IsUnavailable(s));
  EXPECT_THAT(s.message(), HasSubstr("Register with 127.0.0.1:1"));
  EXPECT_THAT(s.message(), HasSubstr("unreachable"));
}

TEST(RpcUtilTest, AdvertisedAddressTakesTheBoundPortWhenGivenNone) {
  EXPECT_EQ(AdvertisedAddress("", "0.0.0.0:4567"), "0.0.0.0:4567");
  EXPECT_EQ(AdvertisedAddress("node7:7071", "0.0.0.0:4567"), "node7:7071");
  EXPECT_EQ(AdvertisedAddress("node7", "0.0.0.0:4567"), "node7:4567");
  EXPECT_EQ(AdvertisedAddress("node7:0", "0.0.0.0:4567"), "node7:4567");
  EXPECT_EQ(AdvertisedAddress("[fe80::1]", "[::]:4567"), "[fe80::1]:4567");
  EXPECT_EQ(AdvertisedAddress("[fe80::1]:0", "[::]:4567"), "[fe80::1]:4567");
  EXPECT_EQ(AdvertisedAddress("[fe80::1]:99", "[::]:4567"), "[fe80::1]:99");
}

// A server without the service (a worker's port for a coordinator's call)
// answers UNIMPLEMENTED with no text: the status says what that means
// instead of ending in "list from ADDRESS: ".
TEST(RpcUtilTest, UnimplementedAndEmptyMessagesSayWhat) {
  const absl::Status u = FromGrpc(
      grpc::Status(grpc::StatusCode::UNIMPLEMENTED, ""), "list from h:1");
  EXPECT_TRUE(absl::IsUnimplemented(u));
  EXPECT_EQ(u.message(),
            "list from h:1: the server there does not serve this call "
            "(UNIMPLEMENTED): another service listens at that address "
            "(another lockstep daemon, or another program), or another "
            "lockstep version");
  const absl::Status e =
      FromGrpc(grpc::Status(grpc::StatusCode::INTERNAL, ""), "submit to h:1");
  EXPECT_EQ(e.message(), "submit to h:1: INTERNAL with no message");
}

TEST(RpcUtilTest, RoundTrip) {
  EXPECT_TRUE(FromGrpc(grpc::Status::OK, "x").ok());
  EXPECT_TRUE(ToGrpc(absl::OkStatus()).ok());
  grpc::Status g = ToGrpc(absl::FailedPreconditionError("stale generation"));
  EXPECT_EQ(g.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(g.error_message(), "stale generation");
}

}  // namespace
}  // namespace lockstep
