// ReplicaSum: barrier sums across threads, in replica order, with the
// workers' part, and the errors of replicas out of step.
#include "core/collective/replica_sum.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

// Runs fn(r) on one thread per replica and joins them.
template <typename Fn>
void OnThreads(int n, Fn fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&fn, r] { fn(r); });
  for (std::thread& t : threads) t.join();
}

// Polls until `n` replicas wait at the barrier (a signal, not a guess at
// how long another thread takes); false after 10 s.
bool WaitUntilWaiting(ReplicaSum& sum, int n) {
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (sum.waiting() < n) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(ReplicaSumTest, EveryReplicaGetsTheSumOfEveryRound) {
  ReplicaSum sum(3);
  sum.BeginStep(nullptr);
  std::vector<std::vector<float>> got(3);
  OnThreads(3, [&](int r) {
    for (int round = 0; round < 50; ++round) {
      float v[2] = {static_cast<float>(r + 1), static_cast<float>(round)};
      ASSERT_TRUE(sum.For(r)->Sum(round, v, 2).ok());
      got[r].push_back(v[0]);
      got[r].push_back(v[1]);
    }
    sum.Finished(r);
  });
  ASSERT_TRUE(sum.status().ok());
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(got[r].size(), 100u);
    for (int round = 0; round < 50; ++round) {
      EXPECT_EQ(got[r][2 * round], 6.0f);  // 1 + 2 + 3
      EXPECT_EQ(got[r][2 * round + 1], 3.0f * round);
    }
  }
}

TEST(ReplicaSumTest, AddsInReplicaOrderWhateverTheArrivalOrder) {
  // 1e8 + 1 - 1e8 in float: (1e8 + 1) rounds to 1e8, so replica order
  // gives 0 where another order could give 1.
  const float values[3] = {1e8f, 1.0f, -1e8f};
  for (int trial = 0; trial < 20; ++trial) {
    ReplicaSum sum(3);
    sum.BeginStep(nullptr);
    float out[3];
    OnThreads(3, [&](int r) {
      // The last replica is a different one each trial.
      std::this_thread::sleep_for(std::chrono::microseconds(((r + trial) % 3) * 300));
      float v = values[r];
      ASSERT_TRUE(sum.For(r)->Sum(0, &v, 1).ok());
      out[r] = v;
    });
    for (int r = 0; r < 3; ++r) EXPECT_EQ(out[r], 0.0f) << trial;
  }
}

TEST(ReplicaSumTest, TheWorkersSumRunsOncePerRoundWithTheKey) {
  ReplicaSum sum(2);
  std::atomic<int> calls{0};
  sum.BeginStep([&](int32_t key, float* data, int64_t count) {
    ++calls;
    EXPECT_EQ(count, 1);
    data[0] += 100.0f * key;  // the other workers' part
    return absl::OkStatus();
  });
  float out[2];
  OnThreads(2, [&](int r) {
    float v = 1.0f;
    ASSERT_TRUE(sum.For(r)->Sum(7, &v, 1).ok());
    out[r] = v;
  });
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(out[0], 702.0f);
  EXPECT_EQ(out[1], 702.0f);
}

TEST(ReplicaSumTest, AFailedWorkersSumFailsEveryReplicaAndTheStep) {
  ReplicaSum sum(3);
  sum.BeginStep([](int32_t, float*, int64_t) {
    return absl::UnavailableError("rank 1 is gone");
  });
  std::vector<absl::Status> got(3);
  OnThreads(3, [&](int r) {
    float v = 1.0f;
    got[r] = sum.For(r)->Sum(0, &v, 1);
    // Later sums of the step fail at once instead of waiting.
    if (got[r].ok()) return;
    got[r] = sum.For(r)->Sum(1, &v, 1);
    sum.Finished(r);
  });
  for (const absl::Status& s : got) {
    EXPECT_TRUE(absl::IsUnavailable(s)) << s;
    EXPECT_EQ(s.message(), "rank 1 is gone");
  }
  EXPECT_EQ(sum.status().message(), "rank 1 is gone");
  // The next step starts clean.
  sum.BeginStep(nullptr);
  EXPECT_TRUE(sum.status().ok());
}

TEST(ReplicaSumTest, ReplicasOutOfStepFailInsteadOfHanging) {
  {
    ReplicaSum sum(2);
    sum.BeginStep(nullptr);
    std::vector<absl::Status> got(2);
    OnThreads(2, [&](int r) {
      std::vector<float> v(r == 0 ? 3 : 4, 1.0f);
      got[r] = sum.For(r)->Sum(8, v.data(), static_cast<int64_t>(v.size()));
    });
    // Both fail with the error of the one that arrived second.
    EXPECT_EQ(got[0], got[1]);
    EXPECT_TRUE(
        got[0].message() ==
            "replica 1 sums 4 values for key 8 while replica 0 sums 3 for "
            "key 8 (the replicas' passes differ)" ||
        got[0].message() ==
            "replica 0 sums 3 values for key 8 while replica 1 sums 4 for "
            "key 8 (the replicas' passes differ)")
        << got[0];
  }
  {
    // Replica 1 ends its pass while replica 0 waits.
    ReplicaSum sum(2);
    sum.BeginStep(nullptr);
    absl::Status waited;
    OnThreads(2, [&](int r) {
      if (r == 0) {
        float v = 1.0f;
        waited = sum.For(0)->Sum(4, &v, 1);
      } else {
        ASSERT_TRUE(WaitUntilWaiting(sum, 1));
        sum.Finished(1);
      }
    });
    EXPECT_EQ(waited.message(),
              "replica 1 ended its pass while replica 0 waits in the sum "
              "across replicas 4 (the replicas' passes differ)");
    EXPECT_EQ(sum.status(), waited);
  }
}

TEST(ReplicaSumTest, AbortReleasesAWaitingReplica) {
  ReplicaSum sum(2);
  sum.BeginStep(nullptr);
  absl::Status waited;
  std::thread waiter([&] {
    float v = 1.0f;
    waited = sum.For(0)->Sum(0, &v, 1);
  });
  ASSERT_TRUE(WaitUntilWaiting(sum, 1));
  sum.Abort(absl::CancelledError("job cancelled"));
  waiter.join();
  EXPECT_TRUE(absl::IsCancelled(waited)) << waited;
  float v = 1.0f;
  EXPECT_TRUE(absl::IsCancelled(sum.For(1)->Sum(0, &v, 1)));
  sum.BeginStep(nullptr);
  EXPECT_TRUE(sum.status().ok());
}

}  // namespace
}  // namespace lockstep
