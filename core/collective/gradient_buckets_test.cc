// Gradient buckets over the in-process ring: buckets form last layer first
// up to the size cap, each is all-reduced once its params are ready, and the
// grads end as the sum over ranks whatever order the params become ready.
#include "core/collective/gradient_buckets.h"

#include <atomic>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "core/collective/in_process_transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::ElementsAre;

// Params of 100, 3, 50, 50, 1 floats; rank r's grad element k is r+1+k/8.
std::vector<std::unique_ptr<Param>> MakeParams(int rank) {
  std::vector<std::unique_ptr<Param>> params;
  for (int64_t n : {100, 3, 50, 50, 1}) {
    auto p = std::make_unique<Param>();
    p->value = Tensor({n});
    p->grad = Tensor({n});
    for (int64_t k = 0; k < n; ++k) p->grad.data()[k] = rank + 1 + k / 8.0f;
    params.push_back(std::move(p));
  }
  return params;
}

std::vector<Param*> Raw(const std::vector<std::unique_ptr<Param>>& v) {
  std::vector<Param*> out;
  for (const auto& p : v) out.push_back(p.get());
  return out;
}

TEST(GradientBucketsTest, BucketsFormLastLayerFirstUpToTheCap) {
  auto ring = InProcessRing::Create(1);
  auto owned = MakeParams(0);
  std::vector<Param*> params = Raw(owned);
  // 400 bytes: param 4 (1) + 3 (50) + 2 (50) = 101 floats >= 100 -> bucket 0.
  GradientBuckets b(params, 400, &ring->endpoint(0), RingOptions());
  ASSERT_EQ(b.num_buckets(), 2);
  EXPECT_THAT(b.bucket_params(0), ElementsAre(4, 3, 2));
  EXPECT_THAT(b.bucket_params(1), ElementsAre(1, 0));
}

// Frozen params (trainable: false) travel in no bucket; their readiness is
// ignored, and the others' buckets form as if they were not there.
TEST(GradientBucketsTest, FrozenParamsAreNeverSent) {
  auto ring = InProcessRing::Create(1);
  auto owned = MakeParams(0);
  std::vector<Param*> params = Raw(owned);
  params[3]->update = ParamUpdate::kFrozen;
  params[0]->update = ParamUpdate::kFrozen;
  GradientBuckets b(params, 400, &ring->endpoint(0), RingOptions());
  ASSERT_EQ(b.num_buckets(), 1);
  EXPECT_THAT(b.bucket_params(0), ElementsAre(4, 2, 1));
  b.BeginStep(0, 0);
  for (int i : {0, 1, 2, 3, 4}) b.ParamReady(i);
  ASSERT_TRUE(b.FinishStep().ok());
  EXPECT_EQ(b.stats().bytes, (1 + 50 + 3) * 4);
}

TEST(GradientBucketsTest, SumsOverRanksWhateverTheReadyOrder) {
  for (int world : {1, 2, 3}) {
    auto ring = InProcessRing::Create(world);
    std::vector<std::vector<std::unique_ptr<Param>>> owned;
    for (int r = 0; r < world; ++r) owned.push_back(MakeParams(r));
    std::vector<std::thread> threads;
    std::vector<absl::Status> status(world);
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        std::vector<Param*> params = Raw(owned[r]);
        GradientBuckets b(params, 64, &ring->endpoint(r), RingOptions());
        for (int step = 0; step < 3 && status[r].ok(); ++step) {
          b.BeginStep(1, step);
          // Backward order on even ranks, shuffled on odd ones.
          const std::vector<int> order = r % 2
                                             ? std::vector<int>{2, 4, 0, 3, 1}
                                             : std::vector<int>{4, 3, 2, 1, 0};
          for (int i : order) b.ParamReady(i);
          status[r] = b.FinishStep();
          // Restore the inputs for the next step.
          if (step < 2) owned[r] = MakeParams(r);
          params = Raw(owned[r]);
          (void)params;
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < world; ++r) {
      ASSERT_TRUE(status[r].ok()) << status[r];
    }
  }
}

TEST(GradientBucketsTest, OneStepSumIsExact) {
  const int world = 3;
  auto ring = InProcessRing::Create(world);
  std::vector<std::vector<std::unique_ptr<Param>>> owned;
  for (int r = 0; r < world; ++r) owned.push_back(MakeParams(r));
  std::vector<absl::Status> status(world);
  std::vector<BucketStats> stats(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      std::vector<Param*> params = Raw(owned[r]);
      GradientBuckets b(params, 64, &ring->endpoint(r), RingOptions());
      b.BeginStep(7, 42);
      for (int i = 4; i >= 0; --i) b.ParamReady(i);
      status[r] = b.FinishStep();
      stats[r] = b.stats();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(status[r].ok()) << status[r];
    EXPECT_EQ(stats[r].bytes, 204 * 4);
    for (size_t i = 0; i < owned[r].size(); ++i) {
      const Tensor& g = owned[r][i]->grad;
      for (int64_t k = 0; k < g.size(); ++k) {
        // (1 + 2 + 3) + 3 * k/8: small integers and eighths, exact in float.
        ASSERT_EQ(g.data()[k], 6 + 3 * (k / 8.0f))
            << "param " << i << " k " << k;
      }
    }
  }
}

// cluster.shard "gradients": after the step a rank keeps the sums of its
// ranges (and, with copies, the previous rank's) and hands back the pages
// of the rest; every released element reads 0 and nothing kept is lost.
TEST(GradientBucketsTest,
     ReleaseKeepsTheOwnedAndCopiedSumsAndHandsBackTheRest) {
  const int world = 3;
  const int64_t big = 300000;  // a bucket of its own (in place)
  for (bool copies : {false, true}) {
    auto ring = InProcessRing::Create(world);
    std::vector<std::vector<std::unique_ptr<Param>>> owned(world);
    for (int r = 0; r < world; ++r) {
      for (int64_t n : {int64_t{5}, int64_t{7}, big}) {
        auto p = std::make_unique<Param>();
        p->value = Tensor({n});
        p->grad = Tensor({n});
        for (int64_t k = 0; k < n; ++k) {
          p->grad.data()[k] = r + 1 + (k % 64) / 8.0f;
        }
        owned[r].push_back(std::move(p));
      }
    }
    std::vector<absl::Status> status(world);
    std::vector<BucketStats> stats(world);
    std::vector<std::vector<ParamRange>> kept(world);
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        std::vector<Param*> params = Raw(owned[r]);
        BucketSharding sharding;
        sharding.shard = true;
        sharding.copies = copies;
        sharding.release = true;
        GradientBuckets b(params, 1 << 20, &ring->endpoint(r), RingOptions(),
                          sharding);
        ASSERT_EQ(b.num_buckets(), 2);
        b.BeginStep(7, 42);
        for (int i = 2; i >= 0; --i) b.ParamReady(i);
        status[r] = b.FinishStep();
        stats[r] = b.stats();
        kept[r] = b.OwnedRanges();
        if (copies) {
          for (const ParamRange& c : b.CopyRanges()) kept[r].push_back(c);
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < world; ++r) {
      ASSERT_TRUE(status[r].ok()) << status[r];
      std::vector<std::vector<bool>> is_kept(3);
      for (int i = 0; i < 3; ++i)
        is_kept[i].assign(owned[r][i]->grad.size(), false);
      int64_t kept_elements = 0;
      for (const ParamRange& k : kept[r]) {
        for (int64_t e = k.begin; e < k.begin + k.size; ++e) {
          is_kept[k.param][e] = true;
        }
        kept_elements += k.size;
      }
      EXPECT_EQ(kept_elements, (copies ? 2 : 1) * (big + 12) / world)
          << "rank " << r;
      int64_t zeros = 0, not_kept = 0;
      for (int i = 0; i < 3; ++i) {
        const Tensor& g = owned[r][i]->grad;
        for (int64_t k = 0; k < g.size(); ++k) {
          const float v = g.data()[k];
          if (is_kept[i][k]) {
            // (1 + 2 + 3) + 3 * (k % 64) / 8: exact in float.
            ASSERT_EQ(v, 6 + 3 * ((k % 64) / 8.0f))
                << "rank " << r << " param " << i << " k " << k;
          } else {
            ++not_kept;
            zeros += v == 0.0f;  // a sum or partial sum is never 0
          }
        }
      }
      EXPECT_EQ(zeros * 4, stats[r].released_bytes) << "rank " << r;
      // Every whole page outside the kept segments: at most two partial
      // pages at each of the (at most two) gaps' ends stay.
      EXPECT_GE(zeros, not_kept - 4 * 1024) << "rank " << r;
      EXPECT_GT(zeros, big / 3 - 4 * 1024) << "rank " << r;
    }
  }
}

TEST(GradientBucketsTest, AMissingPeerFailsTheStepNamingTheBucket) {
  auto ring = InProcessRing::Create(2);
  auto owned = MakeParams(0);
  std::vector<Param*> params = Raw(owned);
  RingOptions o;
  o.timeout = absl::Milliseconds(300);
  GradientBuckets b(params, 64, &ring->endpoint(0), o);
  b.BeginStep(1, 0);
  for (int i = 4; i >= 0; --i) b.ParamReady(i);
  absl::Status s = b.FinishStep();
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("all-reduce of gradient bucket 0"));
}

// Rank 0 of 2 whose first send runs out of memory; later sends fail as a
// broken link does.
class ThrowingTransport : public Transport {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  absl::Status SendToNext(const CollectiveTag&, const void*, int64_t, WireType,
                          const SendTracker&) override {
    if (!thrown_.exchange(true)) throw std::bad_alloc();
    return absl::UnavailableError("the link to rank 1 is broken");
  }
  absl::Status RecvFromPrev(const CollectiveTag&, absl::Time, float*, int64_t,
                            WireType, RecvOp) override {
    return absl::UnavailableError("the link from rank 1 is broken");
  }
  void Abort(const absl::Status&) override {}

 private:
  std::atomic<bool> thrown_{false};
};

// What a bucket's all-reduce throws on the bucket thread (std::bad_alloc)
// is rethrown by FinishStep on the caller's, once every bucket is counted
// (the later ones skipped); it ended the process. The next step starts
// clean: its failure is a status again.
TEST(GradientBucketsTest, AThrowingAllReduceIsRethrownByFinishStep) {
  ThrowingTransport transport;
  auto owned = MakeParams(0);
  std::vector<Param*> params = Raw(owned);
  GradientBuckets b(params, 64, &transport, RingOptions());
  ASSERT_GT(b.num_buckets(), 1);
  b.BeginStep(1, 0);
  for (int i = 4; i >= 0; --i) b.ParamReady(i);
  EXPECT_THROW(b.FinishStep().IgnoreError(), std::bad_alloc);
  b.BeginStep(1, 1);
  for (int i = 4; i >= 0; --i) b.ParamReady(i);
  absl::Status s = b.FinishStep();
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
}

}  // namespace
}  // namespace lockstep
