// The batch_norm layer built through the registry: parameters in both
// naming conventions, gradients against finite differences, the running and
// batch statistics, the fused ReLU6, and sync: true's sums across replicas.
#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "core/layers/registry.h"
#include "core/layers/test_util.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using testing::BuildError;
using testing::BuildLayer;
using testing::GradCheck;
using testing::RandomVector;
using testing::RunForward;

TEST(LayersTest, BatchNormParamsGradientsStatisticsAndErrors) {
  std::unique_ptr<Layer> l = BuildLayer(
      R"({"type": "batch_norm", "name": "bn", "momentum": 0.9})", {{3, 2, 4}});
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->output_shape(), (Shape{3, 2, 4}));
  std::vector<Param*> p = l->params();
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0]->name, "bn/gamma");
  EXPECT_EQ(p[3]->name, "bn/moving_variance");
  EXPECT_EQ(p[0]->value.values(), std::vector<float>(4, 1.0f));
  EXPECT_EQ(p[2]->value.values(), std::vector<float>(4, 0.0f));
  EXPECT_EQ(p[3]->value.values(), std::vector<float>(4, 1.0f));
  EXPECT_EQ(p[1]->update, ParamUpdate::kOptimizer);
  EXPECT_EQ(p[2]->update, ParamUpdate::kMovingAverage);
  EXPECT_EQ(p[3]->update, ParamUpdate::kMovingAverage);
  EXPECT_FLOAT_EQ(p[3]->momentum, 0.9f);
  std::unique_ptr<Layer> torch =
      BuildLayer(R"({"type": "batch_norm", "name": "bn"})", {{4}},
                 ParamNaming::kTorch);
  ASSERT_NE(torch, nullptr);
  EXPECT_EQ(torch->params()[0]->name, "bn.weight");
  EXPECT_EQ(torch->params()[1]->name, "bn.bias");
  EXPECT_EQ(torch->params()[2]->name, "bn.running_mean");
  EXPECT_EQ(torch->params()[3]->name, "bn.running_var");

  // Non-trivial scale, shift and running statistics.
  p[0]->value.values() = {1.5f, -0.5f, 2.0f, 0.75f};
  p[1]->value.values() = {0.1f, -0.2f, 0.3f, 0.0f};
  p[2]->value.values() = {0.2f, -0.1f, 0.0f, 0.5f};
  p[3]->value.values() = {0.5f, 2.0f, 1.0f, 0.25f};
  PassContext train;
  train.training = true;
  GradCheck(*l, 3, train, 2e-3);
  GradCheck(*l, 2, PassContext(), 2e-3);  // inference: running statistics

  // Inference is the affine map of the running statistics.
  std::unique_ptr<Layer> one =
      BuildLayer(R"({"type": "batch_norm", "epsilon": 0.25})", {{1}});
  ASSERT_NE(one, nullptr);
  one->params()[0]->value.values() = {2.0f};
  one->params()[1]->value.values() = {1.0f};
  one->params()[2]->value.values() = {3.0f};
  one->params()[3]->value.values() = {0.75f};  // sqrt(0.75 + 0.25) = 1
  EXPECT_EQ(RunForward(*one, 2, PassContext(), {{5.0f, 2.0f}}),
            (std::vector<float>{5.0f, -1.0f}));
  // Training normalizes with the batch's own: mean 3, biased variance 4.
  const std::vector<float> y = RunForward(*one, 2, train, {{5.0f, 1.0f}});
  const float r = 1.0f / std::sqrt(4.25f);
  EXPECT_FLOAT_EQ(y[0], 2.0f * 2.0f * r + 1.0f);
  EXPECT_FLOAT_EQ(y[1], -2.0f * 2.0f * r + 1.0f);
  // Backward adds the samples times the batch mean and unbiased variance
  // (8 = 4 * 2 / 1) to the statistics' "gradients".
  LayerIO io;
  io.n = 2;
  std::vector<float> x = {5.0f, 1.0f}, out(2), dy = {1.0f, 1.0f}, dx(2);
  std::vector<float> dw[4] = {{0.0f}, {0.0f}, {0.5f}, {0.0f}};
  io.x = {x.data()};
  io.y = out.data();
  io.dy = dy.data();
  io.dx = {dx.data()};
  for (int k = 0; k < 4; ++k) {
    io.w.push_back(one->params()[k]->value.data());
    io.dw.push_back(dw[k].data());
  }
  one->Forward(io, train);
  one->Backward(io, train);
  EXPECT_FLOAT_EQ(dw[2][0], 0.5f + 2 * 3.0f);
  EXPECT_FLOAT_EQ(dw[3][0], 2 * 8.0f);
  EXPECT_FLOAT_EQ(dw[1][0], 2.0f);  // sum(dy)

  // With MobileNetV2's ReLU6 fused: large gamma so both clips act.
  std::unique_ptr<Layer> act = BuildLayer(
      R"({"type": "batch_norm", "activation": "relu6"})", {{5, 3}});
  ASSERT_NE(act, nullptr);
  act->params()[0]->value.values() = {8.0f, -7.0f, 5.0f};
  const std::vector<float> clipped = RunForward(
      *act, 4, train, {RandomVector(4 * 15, 21, -2, 2)});
  EXPECT_GT(std::count(clipped.begin(), clipped.end(), 6.0f), 5);
  EXPECT_GT(std::count(clipped.begin(), clipped.end(), 0.0f), 5);
  GradCheck(*act, 4, train, {RandomVector(4 * 15, 21, -2, 2)}, {true}, 2e-3,
            1e-3f);
  EXPECT_EQ(BuildError(R"({"type": "batch_norm", "activation": "gelu"})",
                       {{4}}),
            "layer (l): activation \"gelu\" is not for batch_norm");
  EXPECT_EQ(BuildError(R"({"type": "batch_norm", "momentum": 1.5})", {{4}}),
            "layer.momentum: must be in [0, 1], got 1.5");
  EXPECT_EQ(BuildError(R"({"type": "batch_norm", "epsilon": 0})", {{4}}),
            "layer.epsilon: must be > 0, got 0");
  EXPECT_EQ(BuildError(R"({"type": "batch_norm", "center": false})", {{4}}),
            "layer.center: unknown field");
}

// A collective of one replica: the sum is the values themselves; counts
// the calls and their sizes.
class OneReplica : public PassCollective {
 public:
  absl::Status Sum(int32_t key, float*, int64_t count) override {
    calls.push_back({key, count});
    return absl::OkStatus();
  }
  std::vector<std::pair<int32_t, int64_t>> calls;
};

// sync: true on one replica computes the batch's statistics as sync false
// does: with one sum of both moments around the running mean when it is
// near the batch's (within 4 standard deviations), with a second exact one
// when it is not (mean 1000, spread 0.01: the shifted moments alone would
// lose the variance). Backward's one sum of 2 values per channel, and
// every gradient, check out too.
TEST(LayersTest, SyncBatchNormSumsOnceOrTwiceAndMatchesTheBatch) {
  std::unique_ptr<Layer> local = BuildLayer(
      R"({"type": "batch_norm", "epsilon": 0.00001})", {{2, 3}});
  std::unique_ptr<Layer> sync = BuildLayer(
      R"({"type": "batch_norm", "epsilon": 0.00001, "sync": true})", {{2, 3}});
  ASSERT_NE(local, nullptr);
  ASSERT_NE(sync, nullptr);
  EXPECT_TRUE(sync->SumsAcrossReplicas());
  EXPECT_FALSE(local->SumsAcrossReplicas());
  OneReplica one;
  PassContext train;
  train.training = true;
  PassContext train_sync = train;
  train_sync.collective = &one;
  train_sync.collective_key = 40;
  struct Case {
    float offset, spread;
    size_t forward_sums;
    float tol;  // relative to the output's largest entry
  };
  for (const Case& c : {Case{0.3f, 1.0f, 1, 2e-6f},
                        Case{1000.0f, 0.01f, 2, 2e-4f}}) {
    SCOPED_TRACE(c.offset);
    std::vector<float> x = RandomVector(5 * 6, 3, -c.spread, c.spread);
    for (float& v : x) v += c.offset;
    one.calls.clear();
    const std::vector<float> want = RunForward(*local, 5, train, {x});
    const std::vector<float> got = RunForward(*sync, 5, train_sync, {x});
    ASSERT_EQ(one.calls.size(), c.forward_sums);
    EXPECT_EQ(one.calls[0], (std::pair<int32_t, int64_t>{40, 7}));
    if (c.forward_sums == 2) {
      EXPECT_EQ(one.calls[1], (std::pair<int32_t, int64_t>{41, 3}));
    }
    float top = 0, worst = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      top = std::max(top, std::fabs(want[i]));
      worst = std::max(worst, std::fabs(want[i] - got[i]));
    }
    EXPECT_LE(worst, c.tol * top);
  }
  one.calls.clear();
  GradCheck(*sync, 4, train_sync, 2e-3);
  EXPECT_NE(std::find(one.calls.begin(), one.calls.end(),
                      std::pair<int32_t, int64_t>{42, 6}),
            one.calls.end());
  EXPECT_EQ(BuildError(R"({"type": "batch_norm", "sync": 1})", {{4}}),
            "layer.sync: must be true or false, got 1");
}

}  // namespace
}  // namespace lockstep
