// Model training steps: an empty slice, gradients overwritten (not
// accumulated) and scaled, changing batch sizes, and SGD learning a
// separable problem.
#include "core/model/model.h"

#include <random>
#include <vector>

#include "core/job/job_spec.h"
#include "core/model/model_test_util.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using testing::BuildOrDie;
using testing::Conv;
using testing::Dense;
using testing::Labels;
using testing::Of;
using testing::RandomInput;
using testing::Xent;

TEST(ModelTest, EmptySliceZeroesGradientsAndReportsThem) {
  ModelSpec spec;
  spec.inputs = {{"input", {3}}};
  spec.layers = {Dense(4, "relu"), Dense(2)};
  auto m = BuildOrDie(spec);
  for (Param* p : m->params()) {
    for (float& g : p->grad.values()) g = 7.0f;
  }
  std::vector<int> ready;
  m->SetGradReadyCallback([&](int i) { ready.push_back(i); });
  Tensor x({0, 3});
  BatchLoss r = m->TrainStep(x, nullptr, Xent(), 1.0f, 1);
  EXPECT_EQ(r.count, 0);
  EXPECT_EQ(r.loss_sum, 0);
  EXPECT_EQ(r.correct, 0);
  for (Param* p : m->params()) {
    for (float g : p->grad.values()) ASSERT_EQ(g, 0.0f);
  }
  EXPECT_EQ(ready, (std::vector<int>{2, 3, 0, 1}));
  EXPECT_EQ(m->Evaluate(x, nullptr, Xent()).count, 0);
  EXPECT_EQ(m->Evaluate(Tensor(), nullptr, Xent()).count, 0);
}

TEST(ModelTest, GradientsAreOverwrittenAndScaleLinearly) {
  ModelSpec spec;
  spec.inputs = {{"input", {2, 2, 1}}};
  spec.layers = {Of("flatten"), Dense(6, "tanh"), Dense(3)};
  auto m = BuildOrDie(spec);
  Tensor x = RandomInput(*m, 7, 8);
  std::vector<int32_t> y = Labels(7, 3);
  std::vector<int> ready;
  m->SetGradReadyCallback([&](int i) { ready.push_back(i); });
  BatchLoss r1 = m->TrainStep(x, y.data(), Xent(), 1.0f, 1);
  EXPECT_EQ(ready, (std::vector<int>{2, 3, 0, 1}));
  std::vector<float> g1 = m->params()[0]->grad.values();
  m->TrainStep(x, y.data(), Xent(), 1.0f, 1);
  EXPECT_EQ(m->params()[0]->grad.values(), g1);  // not accumulated
  m->TrainStep(x, y.data(), Xent(), 0.25f, 1);
  for (size_t i = 0; i < g1.size(); ++i) {
    EXPECT_NEAR(m->params()[0]->grad.values()[i], 0.25f * g1[i], 1e-7);
  }
  // Evaluate: same loss without dropout, grads untouched.
  std::vector<float> before = m->params()[0]->grad.values();
  BatchLoss e = m->Evaluate(x, y.data(), Xent());
  EXPECT_NEAR(e.loss_sum, r1.loss_sum, 1e-6);
  EXPECT_EQ(e.correct, r1.correct);
  EXPECT_EQ(e.count, 7);
  EXPECT_EQ(m->params()[0]->grad.values(), before);
}

TEST(ModelTest, ChangingBatchSizesGiveTheSameResultsAsAFreshModel) {
  ModelSpec spec;
  spec.inputs = {{"input", {6, 6, 1}}};
  spec.layers = {Conv(4, 3, 1, "same", "relu"), Of("max_pool2d"), Of("flatten"),
                 Dense(3)};
  auto m = BuildOrDie(spec);
  Tensor big = RandomInput(*m, 9, 9), small = RandomInput(*m, 4, 10);
  std::vector<int32_t> y = Labels(9, 3);
  m->TrainStep(big, y.data(), Xent(), 1.0f, 1);
  BatchLoss a = m->TrainStep(small, y.data(), Xent(), 1.0f, 1);
  std::vector<float> ga = m->params()[0]->grad.values();
  auto fresh = BuildOrDie(spec);
  BatchLoss b = fresh->TrainStep(small, y.data(), Xent(), 1.0f, 1);
  EXPECT_EQ(a.loss_sum, b.loss_sum);
  EXPECT_EQ(ga, fresh->params()[0]->grad.values());
}

TEST(ModelTest, SgdLearnsASeparableProblem) {
  // Two Gaussian blobs per class in 2-D, three classes.
  ModelSpec spec;
  spec.inputs = {{"input", {2}}};
  spec.layers = {Dense(16, "relu"), Dense(3, "softmax")};
  auto m = BuildOrDie(spec, 3);
  const int64_t n = 96;
  Tensor x({n, 2});
  std::vector<int32_t> y(n);
  std::mt19937 gen(4);
  std::normal_distribution<float> noise(0, 0.3f);
  const float cx[3] = {2, -2, 0}, cy[3] = {0, 0, 2.5f};
  for (int64_t i = 0; i < n; ++i) {
    y[i] = static_cast<int32_t>(i % 3);
    x.data()[2 * i] = cx[y[i]] + noise(gen);
    x.data()[2 * i + 1] = cy[y[i]] + noise(gen);
  }
  const double first = m->Evaluate(x, y.data(), Xent()).loss_sum / n;
  for (int step = 0; step < 300; ++step) {
    m->TrainStep(x, y.data(), Xent(), 1.0f / n, step);
    for (Param* p : m->params()) {
      for (int64_t i = 0; i < p->value.size(); ++i) {
        p->value.data()[i] -= 0.1f * p->grad.data()[i];
      }
    }
  }
  BatchLoss last = m->Evaluate(x, y.data(), Xent());
  EXPECT_LT(last.loss_sum / n, 0.1 * first);
  EXPECT_GE(last.correct, n - 2);
}

}  // namespace
}  // namespace lockstep
