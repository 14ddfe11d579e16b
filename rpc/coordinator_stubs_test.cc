#include "rpc/coordinator_stubs.h"

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

// No call reaches the network here: Run's lambda says how the call ended.
TEST(CoordinatorStubsTest, FollowsTheCoordinatorThatAnswers) {
  CoordinatorStubs stubs({"a:1", "b:2", "c:3"}, TlsFiles{});
  EXPECT_EQ(stubs.address(), "a:1");
  CoordinatorStubs::Stub* first = stubs.get();
  // Answered, even with an error of the call's own: it stays.
  EXPECT_TRUE(absl::IsNotFound(stubs.Run(
      [](CoordinatorStubs::Stub*) { return absl::NotFoundError("no job"); })));
  EXPECT_EQ(stubs.address(), "a:1");
  // Unavailable (down, a standby) or no answer in time: the next one.
  CoordinatorStubs::Stub* used = nullptr;
  (void)stubs.Run([&](CoordinatorStubs::Stub* s) {
    used = s;
    return absl::UnavailableError("not the leader: a standby");
  });
  EXPECT_EQ(used, first);
  EXPECT_EQ(stubs.address(), "b:2");
  (void)stubs.Run([](CoordinatorStubs::Stub*) {
    return absl::DeadlineExceededError("paused");
  });
  EXPECT_EQ(stubs.address(), "c:3");
  (void)stubs.Run(
      [](CoordinatorStubs::Stub*) { return absl::UnavailableError("down"); });
  EXPECT_EQ(stubs.address(), "a:1");  // round and round
  EXPECT_TRUE(
      stubs.Run([](CoordinatorStubs::Stub*) { return absl::OkStatus(); }).ok());
  EXPECT_EQ(stubs.address(), "a:1");
}

// Two calls that failed on the same coordinator move on once, not twice:
// the second sees that another call already moved on.
TEST(CoordinatorStubsTest, CallsThatFailedTogetherMoveOnOnce) {
  CoordinatorStubs stubs({"a:1", "b:2", "c:3"}, TlsFiles{});
  (void)stubs.Run([&](CoordinatorStubs::Stub*) {
    // A call on another thread failed on a:1 meanwhile and moved on.
    (void)stubs.Run(
        [](CoordinatorStubs::Stub*) { return absl::UnavailableError("down"); });
    return absl::UnavailableError("down");
  });
  EXPECT_EQ(stubs.address(), "b:2");
}

TEST(CoordinatorStubsTest, OneCoordinatorStaysPut) {
  CoordinatorStubs stubs({"a:1"}, TlsFiles{});
  EXPECT_EQ(stubs.StepCallTimeout(), std::chrono::seconds(30));
  EXPECT_EQ(CoordinatorStubs({"a:1", "b:2"}, TlsFiles{}).StepCallTimeout(),
            std::chrono::seconds(5));
  (void)stubs.Run(
      [](CoordinatorStubs::Stub*) { return absl::UnavailableError("down"); });
  EXPECT_EQ(stubs.address(), "a:1");
}

}  // namespace
}  // namespace lockstep
