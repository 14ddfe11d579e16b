// The NCCL id relay: a waiter gets the published id, wakes when its
// generation ends (before or during the wait), times out saying so; another
// id for the same generation is refused; a stale generation's id is not
// kept.
#include "coordinator/nccl_relay.h"

#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

// Blocks until `n` Await calls of `job` wait (bounded: 10 s).
void UntilWaiting(NcclIdRelay& relay, const std::string& job, int n) {
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (relay.Waiting(job) < n && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(relay.Waiting(job), n) << "no waiter within 10 s";
}

TEST(NcclIdRelayTest, AWaiterGetsTheIdPublishedDuringItsWait) {
  NcclIdRelay relay;
  std::string got;
  NcclIdRelay::Wait wait = NcclIdRelay::Wait::kTimedOut;
  std::thread waiter([&] {
    wait = relay.Await("job", 2, absl::Now() + absl::Seconds(30), &got);
  });
  UntilWaiting(relay, "job", 1);
  ASSERT_TRUE(relay.Publish("job", 2, std::string(128, 'a')).ok());
  waiter.join();
  EXPECT_EQ(wait, NcclIdRelay::Wait::kPublished);
  EXPECT_EQ(got, std::string(128, 'a'));
  EXPECT_EQ(relay.Waiting("job"), 0);
  // The same bytes again are fine; other bytes are not.
  EXPECT_TRUE(relay.Publish("job", 2, std::string(128, 'a')).ok());
  absl::Status other = relay.Publish("job", 2, std::string(128, 'b'));
  EXPECT_EQ(other.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(other.message(),
            "job job generation 2 already has another NCCL id");
}

TEST(NcclIdRelayTest, TheGenerationsEndWakesItsWaitersEvenIfItCameFirst) {
  NcclIdRelay relay;
  std::string got;
  // Ended before the wait began: no wait at all.
  relay.EndGeneration("job", 3);
  const absl::Time start = absl::Now();
  EXPECT_EQ(relay.Await("job", 3, start + absl::Seconds(30), &got),
            NcclIdRelay::Wait::kEnded);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  // Ended during the wait.
  NcclIdRelay::Wait wait = NcclIdRelay::Wait::kTimedOut;
  std::thread waiter([&] {
    wait = relay.Await("job", 4, absl::Now() + absl::Seconds(30), &got);
  });
  UntilWaiting(relay, "job", 1);
  relay.EndGeneration("job", 4);
  waiter.join();
  EXPECT_EQ(wait, NcclIdRelay::Wait::kEnded);
  // An ended generation's id is not kept; the next generation's is.
  ASSERT_TRUE(relay.Publish("job", 4, std::string(128, 'c')).ok());
  EXPECT_EQ(relay.Await("job", 4, absl::Now(), &got),
            NcclIdRelay::Wait::kEnded);
  ASSERT_TRUE(relay.Publish("job", 5, std::string(128, 'd')).ok());
  EXPECT_EQ(relay.Await("job", 5, absl::Now(), &got),
            NcclIdRelay::Wait::kPublished);
  EXPECT_EQ(got, std::string(128, 'd'));
  // Another job is another entry.
  EXPECT_EQ(relay.Await("other", 5, absl::Now() + absl::Milliseconds(30), &got),
            NcclIdRelay::Wait::kTimedOut);
}

}  // namespace
}  // namespace lockstep
