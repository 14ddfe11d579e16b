// Local replicas: R slices summed in fixed order give the gradient of one
// replica over the whole global batch; the bits do not depend on how many
// lanes ran them; mirroring makes every replica equal.
#include "core/train/replica_set.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <new>

#include "absl/strings/str_cat.h"
#include "core/data/shard_plan.h"
#include "core/data/synthetic_data.h"
#include "core/job/job_spec.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

JobSpec SmallJob() {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(R"({
    "name": "rs", "seed": 5,
    "model": {"input_shape": [8, 8, 1], "layers": [
      {"type": "conv2d", "filters": 4, "kernel_size": 3, "activation": "relu"},
      {"type": "flatten"},
      {"type": "dense", "units": 16, "activation": "tanh"},
      {"type": "dropout", "rate": 0.25},
      {"type": "dense", "units": 10}]},
    "data": {"format": "synthetic"},
    "batch_size_per_replica": 7, "steps": 1})");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

std::vector<std::vector<float>> Grads(ReplicaSet& set) {
  std::vector<std::vector<float>> out;
  for (Param* p : set.params()) out.push_back(p->grad.values());
  return out;
}

TEST(ReplicaSetTest, ReplicasSumToTheGlobalBatchGradient) {
  JobSpec spec = SmallJob();
  spec.model.layers.erase(spec.model.layers.begin() + 3);  // no dropout
  Dataset data = MakeSyntheticDataset(1, Split::kTrain, 100, 10, 1.0);
  // Three replicas of 7 vs. one replica of 21, same samples.
  ShardPlan plan3(100, 21, 3, spec.seed, true);
  ShardPlan plan1(100, 21, 1, spec.seed, true);
  auto set3 = ReplicaSet::Create(spec, {0, 1, 2}, 1);
  auto set1 = ReplicaSet::Create(spec, {0}, 1);
  ASSERT_TRUE(set3.ok() && set1.ok());
  Batch b3 = MakeBatch(data, plan3, {0, 1, 2}, {8, 8, 1}, 2);
  Batch b1 = MakeBatch(data, plan1, {0}, {8, 8, 1}, 2);
  ASSERT_EQ(b3.global_count, 21);
  BatchLoss l3 = *(*set3)->ComputeGradients(b3, *spec.loss, spec.seed);
  BatchLoss l1 = *(*set1)->ComputeGradients(b1, *spec.loss, spec.seed);
  EXPECT_EQ(l3.count, 21);
  EXPECT_NEAR(l3.loss_sum, l1.loss_sum, 1e-4);
  EXPECT_EQ(l3.correct, l1.correct);
  auto g3 = Grads(**set3), g1 = Grads(**set1);
  for (size_t i = 0; i < g1.size(); ++i) {
    for (size_t k = 0; k < g1[i].size(); ++k) {
      EXPECT_NEAR(g3[i][k], g1[i][k], 1e-5) << i << "/" << k;
    }
  }
}

// A conv and a batch norm whose statistics are its replica's (sync false)
// or the global batch's (sync true).
JobSpec BatchNormJob(bool sync) {
  JobSpec spec = SmallJob();
  spec.model.layers.erase(spec.model.layers.begin() + 3);  // no dropout
  absl::StatusOr<JobSpec> bn = ParseJobSpec(absl::StrCat(R"({
    "name": "bn", "model": {"input_shape": [8, 8, 1], "layers": [
      {"type": "batch_norm", "momentum": 0.9, "activation": "relu",
       "sync": )", sync ? "true" : "false", R"(}]},
    "data": {"format": "synthetic"}, "batch_size_per_replica": 7,
    "steps": 1})"));
  EXPECT_TRUE(bn.ok()) << bn.status();
  // conv, batch_norm, flatten, dense, dense.
  spec.model.layers.insert(spec.model.layers.begin() + 1,
                           bn->model.layers[0]);
  return spec;
}

// The largest |a - b| over every gradient (the running statistics'
// contributions included).
float MaxDifference(const std::vector<std::vector<float>>& a,
                    const std::vector<std::vector<float>>& b) {
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t k = 0; k < a[i].size(); ++k) {
      worst = std::max(worst, std::fabs(a[i][k] - b[i][k]));
    }
  }
  return worst;
}

// Sync batch norm: three replicas of 7 compute what one replica of 21
// computes (PyTorch's SyncBatchNorm); without sync they differ. The
// tolerance 2e-5 is float sums taken in another order (gradients here are
// at most ~1).
TEST(ReplicaSetTest, SyncBatchNormReplicasComputeTheGlobalBatch) {
  Dataset data = MakeSyntheticDataset(1, Split::kTrain, 100, 10, 1.0);
  ShardPlan plan3(100, 21, 3, 5, true);
  ShardPlan plan1(100, 21, 1, 5, true);
  Batch b3 = MakeBatch(data, plan3, {0, 1, 2}, {8, 8, 1}, 2);
  Batch b1 = MakeBatch(data, plan1, {0}, {8, 8, 1}, 2);
  std::vector<std::vector<float>> per_replica;
  for (bool sync : {true, false}) {
    const JobSpec spec = BatchNormJob(sync);
    auto set3 = ReplicaSet::Create(spec, {0, 1, 2}, 1);
    auto set1 = ReplicaSet::Create(spec, {0}, 1);
    ASSERT_TRUE(set3.ok() && set1.ok());
    BatchLoss l3 = *(*set3)->ComputeGradients(b3, *spec.loss, spec.seed);
    BatchLoss l1 = *(*set1)->ComputeGradients(b1, *spec.loss, spec.seed);
    const float diff = MaxDifference(Grads(**set3), Grads(**set1));
    if (sync) {
      EXPECT_NEAR(l3.loss_sum, l1.loss_sum, 1e-4);
      EXPECT_LT(diff, 2e-5f);
    } else {
      EXPECT_GT(std::fabs(l3.loss_sum - l1.loss_sum), 1e-3);
      EXPECT_GT(diff, 1e-3f);
    }
  }
}

// The last batch of an epoch gives slices of 7, 1 and 0 samples: the
// replica with none still takes part in every sum (no hang), the result is
// one replica's over the 8, and one lane or three give the same bits (sync
// runs a lane per replica whatever `threads` says).
TEST(ReplicaSetTest, SyncBatchNormWithAnEmptySliceNeitherHangsNorDiffers) {
  const JobSpec spec = BatchNormJob(true);
  Dataset data = MakeSyntheticDataset(1, Split::kTrain, 50, 10, 1.0);
  ShardPlan plan3(50, 21, 3, spec.seed, true);
  ShardPlan plan1(50, 21, 1, spec.seed, true);
  Batch b1 = MakeBatch(data, plan1, {0}, {8, 8, 1}, 2);
  auto set1 = ReplicaSet::Create(spec, {0}, 1);
  ASSERT_TRUE(set1.ok());
  ASSERT_EQ((*set1)->ComputeGradients(b1, *spec.loss, spec.seed)->count, 8);
  std::vector<std::vector<std::vector<float>>> grads;
  for (int threads : {1, 3}) {
    auto set = ReplicaSet::Create(spec, {0, 1, 2}, threads);
    ASSERT_TRUE(set.ok());
    Batch b = MakeBatch(data, plan3, {0, 1, 2}, {8, 8, 1}, 2);
    ASSERT_EQ(b.replicas[2].x.shape()[0], 0);
    EXPECT_EQ((*set)->ComputeGradients(b, *spec.loss, spec.seed)->count, 8);
    grads.push_back(Grads(**set));
  }
  EXPECT_EQ(grads[0], grads[1]);
  EXPECT_LT(MaxDifference(grads[0], Grads(**set1)), 2e-5f);
}

// A replica whose step throws (std::bad_alloc in its loss, between the
// forward and backward batch-norm sums) still releases the others from
// the backward sums: the throw reaches the caller, no lane waits for ever,
// and the next step runs.
TEST(ReplicaSetTest, AReplicaThatThrowsReleasesTheOthersSums) {
  const JobSpec spec = BatchNormJob(true);
  Dataset data = MakeSyntheticDataset(1, Split::kTrain, 100, 10, 1.0);
  ShardPlan plan(100, 21, 3, spec.seed, true);
  Batch b = MakeBatch(data, plan, {0, 1, 2}, {8, 8, 1}, 2);
  auto set = ReplicaSet::Create(spec, {0, 1, 2}, 3);
  ASSERT_TRUE(set.ok());
  Loss throwing = *spec.loss;
  std::atomic<int> calls{0};
  throwing.compute = [&](int64_t rows, int64_t outputs, const float* out,
                         const int32_t* labels, float scale, float* grad) {
    if (calls++ == 0) throw std::bad_alloc();
    return spec.loss->compute(rows, outputs, out, labels, scale, grad);
  };
  EXPECT_THROW((*set)->ComputeGradients(b, throwing, spec.seed).IgnoreError(),
               std::bad_alloc);
  EXPECT_EQ(calls.load(), 3);
  absl::StatusOr<BatchLoss> next =
      (*set)->ComputeGradients(b, *spec.loss, spec.seed);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->count, 21);
}

TEST(ReplicaSetTest, LaneCountDoesNotChangeTheBits) {
  JobSpec spec = SmallJob();
  Dataset data = MakeSyntheticDataset(1, Split::kTrain, 50, 10, 1.0);
  ShardPlan plan(50, 21, 3, spec.seed, true);
  std::vector<std::vector<std::vector<float>>> grads;
  for (int threads : {1, 2, 3}) {
    auto set = ReplicaSet::Create(spec, {0, 1, 2}, threads);
    ASSERT_TRUE(set.ok());
    // The last batch of the epoch: 50 = 2*21 + 8, so slices of 7, 1, 0.
    Batch b = MakeBatch(data, plan, {0, 1, 2}, {8, 8, 1}, 2);
    ASSERT_EQ(b.global_count, 8);
    BatchLoss l = *(*set)->ComputeGradients(b, *spec.loss, spec.seed);
    EXPECT_EQ(l.count, 8);
    grads.push_back(Grads(**set));
  }
  EXPECT_EQ(grads[0], grads[1]);
  EXPECT_EQ(grads[0], grads[2]);
}

TEST(ReplicaSetTest, MirrorAndEvaluate) {
  JobSpec spec = SmallJob();
  auto set = ReplicaSet::Create(spec, {4, 5}, 2);
  ASSERT_TRUE(set.ok());
  EXPECT_EQ((*set)->replica_indices(), (std::vector<int64_t>{4, 5}));
  for (Param* p : (*set)->params()) p->value.values()[0] += 1.0f;
  ASSERT_TRUE((*set)->MirrorParams().ok());
  Dataset test = MakeSyntheticDataset(1, Split::kTest, 2500, 10, 1.0);
  BatchLoss all = *(*set)->Evaluate(test, *spec.loss);
  EXPECT_EQ(all.count, 2500);
  // Lane 1's replica evaluates chunk 1: had it not been mirrored, the sum
  // would differ from replica 0 evaluating everything alone.
  auto one = ReplicaSet::Create(spec, {0}, 1);
  for (Param* p : (*one)->params()) p->value.values()[0] += 1.0f;
  BatchLoss ref = *(*one)->Evaluate(test, *spec.loss);
  EXPECT_EQ(all.correct, ref.correct);
  EXPECT_NEAR(all.loss_sum, ref.loss_sum, 1e-6 * std::abs(ref.loss_sum));
}

}  // namespace
}  // namespace lockstep
