#include "core/data/batch_prefetcher.h"

#include <chrono>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "core/data/dataset.h"
#include "core/data/shard_plan.h"
#include "core/step_pool.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

// Sample i has features i*10 + k and label i % 7.
Dataset CountingDataset(int64_t n, int64_t per) {
  Dataset d;
  d.sample_shape = {per};
  d.num_samples = n;
  d.num_classes = 7;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < per; ++k) d.features.push_back(i * 10 + k);
    d.labels.push_back(static_cast<int32_t>(i % 7));
  }
  return d;
}

void ExpectSame(const Batch& got, const Batch& want) {
  EXPECT_EQ(got.global_step, want.global_step);
  EXPECT_EQ(got.epoch, want.epoch);
  EXPECT_EQ(got.step_in_epoch, want.step_in_epoch);
  EXPECT_EQ(got.global_count, want.global_count);
  ASSERT_EQ(got.replicas.size(), want.replicas.size());
  for (size_t r = 0; r < got.replicas.size(); ++r) {
    EXPECT_EQ(got.replicas[r].x.shape(), want.replicas[r].x.shape());
    EXPECT_EQ(got.replicas[r].x.values(), want.replicas[r].x.values());
    EXPECT_EQ(got.replicas[r].labels, want.replicas[r].labels);
  }
}

TEST(BatchPrefetcherTest, MatchesShardPlanAcrossEpochs) {
  const Dataset data = CountingDataset(23, 4);
  ShardPlan plan(23, 9, 3, /*seed=*/5, true);
  ASSERT_EQ(plan.steps_per_epoch(), 3);
  const std::vector<int64_t> replicas = {0, 1, 2};
  BatchPrefetcher pf(&data, &plan, replicas, {2, 2, 1}, 0, 8, /*depth=*/2);
  int64_t samples_in_epoch0 = 0;
  for (int64_t step = 0; step < 8; ++step) {
    absl::StatusOr<Batch> b = pf.Next();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(b->epoch, step / 3);
    EXPECT_EQ(b->step_in_epoch, step % 3);
    if (b->epoch == 0) samples_in_epoch0 += b->global_count;
    // Direct computation from the plan.
    for (int64_t r = 0; r < 3; ++r) {
      const std::vector<int64_t> idx =
          plan.ReplicaSlice(b->epoch, b->step_in_epoch, r);
      const ReplicaBatch& rb = b->replicas[r];
      ASSERT_EQ(rb.x.shape(),
                (Shape{static_cast<int64_t>(idx.size()), 2, 2, 1}));
      for (size_t i = 0; i < idx.size(); ++i) {
        EXPECT_EQ(rb.labels[i], idx[i] % 7);
        for (int64_t k = 0; k < 4; ++k) {
          EXPECT_EQ(rb.x.data()[i * 4 + k], idx[i] * 10 + k);
        }
      }
    }
    ExpectSame(*b, MakeBatch(data, plan, replicas, {2, 2, 1}, step));
  }
  EXPECT_EQ(samples_in_epoch0, 23);
  absl::StatusOr<Batch> end = pf.Next();
  EXPECT_EQ(end.status().code(), absl::StatusCode::kOutOfRange);
}

// Samples made when batched: value (epoch * 1000 + index) * 10 + k, label
// index % 5, and none for every 9th sample (as an unreadable image).
class CountingMaker : public SampleMaker {
 public:
  explicit CountingMaker(int64_t per) : per_(per) {}
  void Make(int64_t epoch, int64_t index, float* x,
            int32_t* labels) const override {
    for (int64_t k = 0; k < per_; ++k) {
      x[k] = static_cast<float>((epoch * 1000 + index) * 10 + k);
    }
    labels[0] = index % 9 == 0 ? -1 : static_cast<int32_t>(index % 5);
  }
  int64_t LabelCount(int64_t) const override { return 1; }

 private:
  const int64_t per_;
};

// A maker whose sample `bad` runs out of memory.
class FailingMaker : public CountingMaker {
 public:
  explicit FailingMaker(int64_t bad) : CountingMaker(3), bad_(bad) {}
  void Make(int64_t epoch, int64_t index, float* x,
            int32_t* labels) const override {
    if (index == bad_) throw std::bad_alloc();
    CountingMaker::Make(epoch, index, x, labels);
  }

 private:
  const int64_t bad_;
};

// Memory that runs out making a batch, on the prefetch thread or one of
// its fill lanes, reaches the consumer's Next() where that batch would
// have come (the batches before it still do); it ended the process.
TEST(BatchPrefetcherTest, AnExceptionMakingABatchIsRethrownByNext) {
  Dataset d;
  d.sample_shape = {3};
  d.num_samples = 12;
  d.num_classes = 5;
  const ShardPlan plan(12, 4, 1, 42, /*shuffle=*/false);
  d.maker = std::make_shared<FailingMaker>(9);  // step 2's second sample
  BatchPrefetcher pf(&d, &plan, {0}, {3}, 0, 3, /*depth=*/4);
  for (int64_t step = 0; step < 2; ++step) {
    absl::StatusOr<Batch> b = pf.Next();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(b->global_step, step);
  }
  EXPECT_THROW(pf.Next(), std::bad_alloc);
  pf.Stop();
  EXPECT_EQ(pf.Next().status().code(), absl::StatusCode::kCancelled);
}

TEST(BatchPrefetcherTest, MadeSamplesOnSeveralThreadsAreTheSerialOnes) {
  Dataset d;
  d.sample_shape = {3};
  d.num_samples = 100;
  d.num_classes = 5;
  d.maker = std::make_shared<CountingMaker>(3);
  const ShardPlan plan(100, 24, 3, 42, true);
  StepPool pool(3);
  for (int64_t step : {0, 5, 13}) {
    const Batch serial = MakeBatch(d, plan, {0, 1, 2}, {3}, step);
    const Batch shared = MakeBatch(d, plan, {0, 1, 2}, {3}, step, &pool);
    ExpectSame(shared, serial);
    // And they are the maker's values at the plan's indices.
    const std::vector<int64_t> idx =
        plan.ReplicaSlice(serial.epoch, serial.step_in_epoch, 1);
    ASSERT_FALSE(idx.empty());
    EXPECT_EQ(serial.replicas[1].x.values()[0],
              static_cast<float>((serial.epoch * 1000 + idx[0]) * 10));
  }
  EXPECT_EQ(FillThreads(CountingDataset(4, 2)), 1);  // stored: a copy
  EXPECT_GE(FillThreads(d), 1);
  EXPECT_LE(FillThreads(d), 8);
}

TEST(BatchPrefetcherTest, LastBatchHasEmptyReplicaSlices) {
  const Dataset data = CountingDataset(7, 1);
  ShardPlan plan(7, 9, 3, 5, false);  // step 0: 0..6 → [0,1,2] [3,4,5] [6]
  BatchPrefetcher pf(&data, &plan, {1, 2}, {1}, 0, 1);
  absl::StatusOr<Batch> b = pf.Next();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->global_count, 7);
  EXPECT_EQ(b->replicas[0].labels, (std::vector<int32_t>{3, 4, 5}));
  EXPECT_EQ(b->replicas[1].labels, (std::vector<int32_t>{6}));
  ShardPlan plan2(4, 9, 3, 5, false);  // [0,1,2] [3] []
  BatchPrefetcher pf2(&data, &plan2, {2}, {1}, 0, 1);
  b = pf2.Next();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->replicas[0].x.shape(), (Shape{0, 1}));
  EXPECT_TRUE(b->replicas[0].labels.empty());
}

TEST(BatchPrefetcherTest, MicroBatchesCutEachReplicasShareInOrder) {
  const Dataset data = CountingDataset(10, 2);
  // Replicas take 4 samples a step (2 micro-batches of 2): step 0 of 0..9
  // in order is [0..3] [4..7] [8, 9].
  ShardPlan plan(10, 12, 3, 5, false);
  const Batch step = MakeBatch(data, plan, {1, 2}, {2}, 0);
  const Batch m0 = MicroBatch(step, 0, 2, 2);
  const Batch m1 = MicroBatch(step, 1, 2, 2);
  for (const Batch* m : {&m0, &m1}) {
    EXPECT_EQ(m->global_step, 0);
    EXPECT_EQ(m->global_count, 10);  // the step's: gradients scale by it
    EXPECT_EQ(m->global_labels, 10);
    EXPECT_EQ(m->micros, 2);
    ASSERT_EQ(m->replicas.size(), 2u);
  }
  EXPECT_EQ(m0.micro, 0);
  EXPECT_EQ(m1.micro, 1);
  EXPECT_EQ(m0.replicas[0].labels, (std::vector<int32_t>{4 % 7, 5 % 7}));
  EXPECT_EQ(m1.replicas[0].labels, (std::vector<int32_t>{6 % 7, 7 % 7}));
  EXPECT_EQ(m0.replicas[0].x.values(), (std::vector<float>{40, 41, 50, 51}));
  EXPECT_EQ(m1.replicas[0].x.values(), (std::vector<float>{60, 61, 70, 71}));
  // Replica 2's share is short: [8, 9] then nothing.
  EXPECT_EQ(m0.replicas[1].x.shape(), (Shape{2, 2}));
  EXPECT_EQ(m0.replicas[1].labels, (std::vector<int32_t>{8 % 7, 9 % 7}));
  EXPECT_EQ(m1.replicas[1].x.shape(), (Shape{0, 2}));
  EXPECT_TRUE(m1.replicas[1].labels.empty());
}

TEST(BatchPrefetcherTest, ResumeMidEpochGivesSameBatches) {
  const Dataset data = CountingDataset(50, 3);
  ShardPlan plan(50, 8, 2, 17, true);  // 7 steps per epoch
  const std::vector<int64_t> replicas = {0, 1};
  std::vector<Batch> full;
  {
    BatchPrefetcher pf(&data, &plan, replicas, {3}, 0, 20);
    for (int i = 0; i < 20; ++i) {
      absl::StatusOr<Batch> b = pf.Next();
      ASSERT_TRUE(b.ok());
      full.push_back(*std::move(b));
    }
  }
  ShardPlan fresh(50, 8, 2, 17, true);  // as a restarted process would
  BatchPrefetcher resumed(&data, &fresh, replicas, {3}, 10, 20);
  for (int64_t step = 10; step < 20; ++step) {
    absl::StatusOr<Batch> b = resumed.Next();
    ASSERT_TRUE(b.ok());
    ExpectSame(*b, full[step]);
  }
  EXPECT_EQ(resumed.Next().status().code(), absl::StatusCode::kOutOfRange);
}

TEST(BatchPrefetcherTest, StopMidwayJoinsPromptlyAndCancelsNext) {
  const Dataset data = CountingDataset(1000, 16);
  ShardPlan plan(1000, 16, 2, 1, true);
  const auto t0 = std::chrono::steady_clock::now();
  {
    BatchPrefetcher pf(&data, &plan, {0, 1}, {16}, 0, 1000000, 3);
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(pf.Next().ok());
    pf.Stop();
    pf.Stop();  // idempotent
    EXPECT_EQ(pf.Next().status().code(), absl::StatusCode::kCancelled);
  }
  {
    // Destructor alone stops a producer blocked on a full queue.
    BatchPrefetcher pf(&data, &plan, {0, 1}, {16}, 0, 1000000, 1);
    ASSERT_TRUE(pf.Next().ok());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_LT(seconds, 2.0);
}

TEST(BatchPrefetcherTest, PeekReadyShowsWhatNextReturnsWithoutBlocking) {
  const Dataset data = CountingDataset(40, 3);
  ShardPlan plan(40, 8, 2, 9, true);
  const std::vector<int64_t> replicas = {0, 1};
  BatchPrefetcher pf(&data, &plan, replicas, {3}, 2, 6, /*depth=*/2);
  for (int64_t step = 2; step < 6; ++step) {
    // Wait (bounded) for the producer, then the peeked batch is the one
    // Next() hands out, and it stays valid while later ones are produced.
    const Batch* peeked = nullptr;
    for (int i = 0; i < 2000 && peeked == nullptr; ++i) {
      peeked = pf.PeekReady();
      if (peeked == nullptr) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    ASSERT_NE(peeked, nullptr) << "step " << step << " never became ready";
    EXPECT_EQ(peeked->global_step, step);
    const Batch copy = *peeked;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ExpectSame(*peeked, copy);
    absl::StatusOr<Batch> b = pf.Next();
    ASSERT_TRUE(b.ok()) << b.status();
    ExpectSame(*b, MakeBatch(data, plan, replicas, {3}, step));
    ExpectSame(*b, copy);
  }
  // At the end, and after Stop(), there is nothing to peek at.
  EXPECT_EQ(pf.PeekReady(), nullptr);
  pf.Stop();
  EXPECT_EQ(pf.PeekReady(), nullptr);
}

TEST(BatchPrefetcherTest, EmptyRangeAndEmptyDataset) {
  const Dataset data = CountingDataset(10, 1);
  ShardPlan plan(10, 2, 1, 1, true);
  BatchPrefetcher none(&data, &plan, {0}, {1}, 5, 5);
  EXPECT_EQ(none.Next().status().code(), absl::StatusCode::kOutOfRange);

  const Dataset empty = CountingDataset(0, 1);
  ShardPlan empty_plan(0, 2, 1, 1, true);
  BatchPrefetcher pf(&empty, &empty_plan, {0}, {1}, 0, 3);
  EXPECT_EQ(pf.Next().status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace lockstep
