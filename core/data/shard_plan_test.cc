#include "core/data/shard_plan.h"

#include <algorithm>
#include <thread>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

// (num_samples, batch_size_per_replica, total_replicas)
class ShardPlanCoverTest
    : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, int64_t>> {};

TEST_P(ShardPlanCoverTest, ReplicaSlicesCoverEverySampleOncePerEpoch) {
  const auto [n, b, r] = GetParam();
  for (bool shuffle : {true, false}) {
    ShardPlan plan(n, b * r, r, /*seed=*/99, shuffle);
    EXPECT_EQ(plan.global_batch_size(), b * r);
    EXPECT_EQ(plan.steps_per_epoch(), (n + b * r - 1) / (b * r));
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      std::vector<int> seen(n, 0);
      int64_t total = 0;
      for (int64_t s = 0; s < plan.steps_per_epoch(); ++s) {
        const std::vector<int64_t> global = plan.GlobalBatch(epoch, s);
        ASSERT_EQ(static_cast<int64_t>(global.size()),
                  plan.GlobalBatchCount(epoch, s));
        if (s + 1 < plan.steps_per_epoch()) {
          EXPECT_EQ(plan.GlobalBatchCount(epoch, s), b * r);
        }
        std::vector<int64_t> joined;
        for (int64_t rep = 0; rep < r; ++rep) {
          const std::vector<int64_t> slice = plan.ReplicaSlice(epoch, s, rep);
          EXPECT_LE(static_cast<int64_t>(slice.size()), b);
          joined.insert(joined.end(), slice.begin(), slice.end());
          for (int64_t i : slice) {
            ASSERT_GE(i, 0);
            ASSERT_LT(i, n);
            ++seen[i];
          }
        }
        EXPECT_EQ(joined, global);  // contiguous blocks, in replica order
        total += static_cast<int64_t>(global.size());
      }
      EXPECT_EQ(total, n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(seen[i], 1) << "sample " << i << " epoch " << epoch;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, ShardPlanCoverTest,
    ::testing::Values(std::make_tuple(0, 4, 1), std::make_tuple(1, 4, 3),
                      std::make_tuple(10, 1, 1), std::make_tuple(10, 3, 1),
                      std::make_tuple(10, 3, 2), std::make_tuple(11, 2, 5),
                      std::make_tuple(23, 4, 3), std::make_tuple(100, 8, 4),
                      std::make_tuple(97, 5, 5), std::make_tuple(64, 8, 2),
                      std::make_tuple(3, 2, 4)));

TEST(ShardPlanTest, AnyWorldSplitsTheSameGlobalBatchInFloorBlocks) {
  ShardPlan plan(/*num_samples=*/30, /*global_batch=*/12, /*replicas=*/5, 3,
                 false);
  EXPECT_EQ(plan.max_replica_share(), 3);
  // floor(r * 12 / 5): 0, 2, 4, 7, 9, 12.
  EXPECT_EQ(plan.ReplicaSlice(0, 1, 0), (std::vector<int64_t>{12, 13}));
  EXPECT_EQ(plan.ReplicaSlice(0, 1, 2), (std::vector<int64_t>{16, 17, 18}));
  EXPECT_EQ(plan.ReplicaSlice(0, 1, 4), (std::vector<int64_t>{21, 22, 23}));
  // The last global batch (6 samples) cut at its count.
  EXPECT_EQ(plan.ReplicaSlice(0, 2, 2), (std::vector<int64_t>{28, 29}));
  EXPECT_TRUE(plan.ReplicaSlice(0, 2, 3).empty());
}

// An elastic job's world changes between steps (a shrink, then a grow),
// each generation with its own plan of the same global batch: every sample
// of every epoch is still taken exactly once.
TEST(ShardPlanTest, EverySampleOncePerEpochAcrossAShrinkAndAGrow) {
  const int64_t n = 103, g = 12;  // 9 steps an epoch, the last of 7
  const ShardPlan three(n, g, 3, 21, true), two(n, g, 2, 21, true),
      five(n, g, 5, 21, true);
  ASSERT_EQ(three.steps_per_epoch(), 9);
  // World by global step: 3 replicas, 2 from step 4 (mid epoch 0), 5 from
  // step 11 (mid epoch 1), 2 again from step 16.
  auto plan_at = [&](int64_t step) -> const ShardPlan& {
    if (step < 4) return three;
    if (step < 11) return two;
    if (step < 16) return five;
    return two;
  };
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<int> seen(n, 0);
    for (int64_t s = 0; s < 9; ++s) {
      const ShardPlan& plan = plan_at(epoch * 9 + s);
      std::vector<int64_t> joined;
      for (int64_t r = 0; r < plan.total_replicas(); ++r) {
        const std::vector<int64_t> slice = plan.ReplicaSlice(epoch, s, r);
        EXPECT_LE(static_cast<int64_t>(slice.size()), plan.max_replica_share());
        joined.insert(joined.end(), slice.begin(), slice.end());
        for (int64_t i : slice) ++seen[i];
      }
      // The same global batch whatever the world.
      EXPECT_EQ(joined, three.GlobalBatch(epoch, s)) << epoch << " " << s;
    }
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(seen[i], 1) << "sample " << i << " epoch " << epoch;
    }
  }
}

TEST(ShardPlanTest, LastBatchMayLeaveReplicasShortOrEmpty) {
  ShardPlan plan(/*num_samples=*/11, /*global_batch=*/9, /*replicas=*/3, 1, true);
  ASSERT_EQ(plan.steps_per_epoch(), 2);
  EXPECT_EQ(plan.GlobalBatchCount(0, 1), 2);
  EXPECT_EQ(plan.ReplicaSlice(0, 1, 0).size(), 2u);
  EXPECT_TRUE(plan.ReplicaSlice(0, 1, 1).empty());
  EXPECT_TRUE(plan.ReplicaSlice(0, 1, 2).empty());
  EXPECT_TRUE(plan.GlobalBatch(0, 2).empty());  // past the epoch
}

TEST(ShardPlanTest, DeterministicAcrossInstances) {
  ShardPlan a(1000, 48, 3, 7, true), b(1000, 48, 3, 7, true);
  for (int64_t epoch : {0, 5, 1, 0}) {
    for (int64_t s = 0; s < a.steps_per_epoch(); ++s) {
      for (int64_t r = 0; r < 3; ++r) {
        ASSERT_EQ(a.ReplicaSlice(epoch, s, r), b.ReplicaSlice(epoch, s, r));
      }
    }
  }
  EXPECT_EQ(a.Permutation(3), b.Permutation(3));
}

TEST(ShardPlanTest, EpochsAndSeedsGiveDifferentOrders) {
  ShardPlan a(1000, 10, 1, 7, true), c(1000, 10, 1, 8, true);
  EXPECT_NE(a.Permutation(0), a.Permutation(1));
  EXPECT_NE(a.Permutation(1), a.Permutation(2));
  EXPECT_NE(a.Permutation(0), c.Permutation(0));
  EXPECT_NE(a.GlobalBatch(0, 0), a.GlobalBatch(1, 0));
  std::vector<int64_t> sorted = a.Permutation(4);
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
}

TEST(ShardPlanTest, NoShuffleIsIdentityOrder) {
  ShardPlan plan(10, 4, 2, 7, false);
  EXPECT_EQ(plan.GlobalBatch(0, 0), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(plan.GlobalBatch(3, 1), (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(plan.ReplicaSlice(1, 2, 0), (std::vector<int64_t>{8, 9}));
  EXPECT_TRUE(plan.ReplicaSlice(1, 2, 1).empty());
}

TEST(ShardPlanTest, ConcurrentReadersAgree) {
  // Threads alternate epochs so the one-epoch cache is replaced under them.
  ShardPlan plan(5000, 64, 2, 11, true);
  ShardPlan reference(5000, 64, 2, 11, true);
  std::vector<std::vector<int64_t>> perms;
  for (int64_t e = 0; e < 3; ++e) perms.push_back(reference.Permutation(e));
  std::vector<int> bad(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int64_t i = 0; i < 300; ++i) {
        const int64_t epoch = (i + t) % 3;
        const int64_t step = i % plan.steps_per_epoch();
        const int64_t r = t % 2;
        const int64_t begin = std::min<int64_t>(step * 64 + r * 32, 5000);
        const int64_t end = std::min<int64_t>(begin + 32, 5000);
        std::vector<int64_t> want(perms[epoch].begin() + begin,
                                  perms[epoch].begin() + end);
        if (plan.ReplicaSlice(epoch, step, r) != want) ++bad[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int b : bad) EXPECT_EQ(b, 0);
}

}  // namespace
}  // namespace lockstep
