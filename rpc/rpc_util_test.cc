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

TEST(RpcUtilTest, RoundTrip) {
  EXPECT_TRUE(FromGrpc(grpc::Status::OK, "x").ok());
  EXPECT_TRUE(ToGrpc(absl::OkStatus()).ok());
  grpc::Status g = ToGrpc(absl::FailedPreconditionError("stale generation"));
  EXPECT_EQ(g.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(g.error_message(), "stale generation");
}

}  // namespace
}  // namespace lockstep
