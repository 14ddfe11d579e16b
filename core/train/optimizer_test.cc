// Optimizer updates against hand-computed Keras 3 values, state naming and
// determinism.
#include "core/train/optimizer.h"

#include <cstring>
#include <map>
#include <random>

#include "core/train/square_sum.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

constexpr float kTol = 1e-6f;

// One scalar parameter "dense/kernel" with value 1.
Param Scalar() {
  Param p;
  p.name = "dense/kernel";
  p.value = Tensor({1}, {1.0f});
  p.grad = Tensor({1});
  return p;
}

std::unique_ptr<Optimizer> Make(const OptimizerSpec& spec,
                                std::vector<Param*> params) {
  absl::StatusOr<std::unique_ptr<Optimizer>> opt =
      Optimizer::Create(spec, params);
  EXPECT_TRUE(opt.ok()) << opt.status();
  return std::move(opt).value();
}

// Runs grads 0.5, -0.25, 1.0 and returns the value after each step.
std::vector<float> RunThreeSteps(const OptimizerSpec& spec, double lr) {
  Param p = Scalar();
  std::unique_ptr<Optimizer> opt = Make(spec, {&p});
  std::vector<float> out;
  for (float g : {0.5f, -0.25f, 1.0f}) {
    p.grad.data()[0] = g;
    opt->Apply(lr);
    out.push_back(p.value.data()[0]);
  }
  return out;
}

OptimizerSpec Sgd(double momentum, bool nesterov) {
  OptimizerSpec s;
  s.type = OptimizerType::kSgd;
  s.momentum = momentum;
  s.nesterov = nesterov;
  return s;
}

TEST(OptimizerTest, PlainSgd) {
  // w -= lr * g: 1 - 0.05, + 0.025, - 0.1.
  EXPECT_THAT(RunThreeSteps(Sgd(0, false), 0.1),
              ElementsAre(::testing::FloatNear(0.95f, kTol),
                          ::testing::FloatNear(0.975f, kTol),
                          ::testing::FloatNear(0.875f, kTol)));
}

TEST(OptimizerTest, SgdMomentum) {
  // v = 0.9 v - 0.1 g: -0.05, -0.02, -0.118; w += v.
  EXPECT_THAT(RunThreeSteps(Sgd(0.9, false), 0.1),
              ElementsAre(::testing::FloatNear(0.95f, kTol),
                          ::testing::FloatNear(0.93f, kTol),
                          ::testing::FloatNear(0.812f, kTol)));
}

TEST(OptimizerTest, SgdNesterov) {
  // w += 0.9 v - 0.1 g with the new v: -0.095, +0.007, -0.2062.
  EXPECT_THAT(RunThreeSteps(Sgd(0.9, true), 0.1),
              ElementsAre(::testing::FloatNear(0.905f, kTol),
                          ::testing::FloatNear(0.912f, kTol),
                          ::testing::FloatNear(0.7058f, kTol)));
}

TEST(OptimizerTest, Adam) {
  OptimizerSpec s;  // adam, beta 0.9 / 0.999, epsilon 1e-7
  // Step 1: m = 0.05, v = 0.00025, alpha = 0.01 sqrt(0.001) / 0.1, so the
  // update is 0.01 * m_hat / (sqrt(v_hat) + eps') ~= 0.01.
  EXPECT_THAT(RunThreeSteps(s, 0.01),
              ElementsAre(::testing::FloatNear(0.99000006f, kTol),
                          ::testing::FloatNear(0.98733671f, kTol),
                          ::testing::FloatNear(0.98075561f, kTol)));
}

TEST(OptimizerTest, AdamSlots) {
  OptimizerSpec s;
  Param p = Scalar();
  std::unique_ptr<Optimizer> opt = Make(s, {&p});
  p.grad.data()[0] = 0.5f;
  opt->Apply(0.01);
  p.grad.data()[0] = -0.25f;
  opt->Apply(0.01);
  auto state = opt->StateTensors();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state[0].first, "adam/m/dense/kernel");
  EXPECT_EQ(state[1].first, "adam/v/dense/kernel");
  EXPECT_NEAR(state[0].second->data()[0], 0.02, kTol);
  EXPECT_NEAR(state[1].second->data()[0], 0.00031225, 1e-9);
  EXPECT_EQ(opt->iterations(), 2);
}

TEST(OptimizerTest, AdamW) {
  OptimizerSpec s;
  s.type = OptimizerType::kAdamW;
  s.weight_decay = 0.004;
  // As Adam, after w -= w * 0.004 * 0.01 each step.
  EXPECT_THAT(RunThreeSteps(s, 0.01),
              ElementsAre(::testing::FloatNear(0.98996006f, kTol),
                          ::testing::FloatNear(0.98725711f, kTol),
                          ::testing::FloatNear(0.98063652f, kTol)));
  Param p = Scalar();
  auto opt = Make(s, {&p});
  auto state = opt->StateTensors();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state[0].first, "adamw/m/dense/kernel");
}

TEST(OptimizerTest, ExcludeFromWeightDecayMatchesNameParts) {
  OptimizerSpec s = Sgd(0, false);
  s.weight_decay = 0.5;
  s.exclude_from_weight_decay = {"LayerNorm", "bias"};
  Param kernel = Scalar(), bias = Scalar(), norm = Scalar();
  bias.name = "bert.encoder.layer.0.output.dense.bias";
  norm.name = "bert.embeddings.LayerNorm.weight";
  auto opt = Make(s, {&kernel, &bias, &norm});
  EXPECT_TRUE(opt->Decays("dense/kernel"));
  EXPECT_FALSE(opt->Decays(bias.name));
  EXPECT_FALSE(opt->Decays(norm.name));
  // Zero gradients: only the decay moves a weight (1 - 0.5 * 0.1).
  opt->Apply(0.1);
  EXPECT_FLOAT_EQ(kernel.value.data()[0], 0.95f);
  EXPECT_EQ(bias.value.data()[0], 1.0f);
  EXPECT_EQ(norm.value.data()[0], 1.0f);
}

TEST(OptimizerTest, GlobalClipnormScalesEveryGradientTogether) {
  OptimizerSpec s = Sgd(0, false);
  s.global_clipnorm = 1.0;
  Param a = Scalar(), b = Scalar();
  b.name = "b";
  auto opt = Make(s, {&a, &b});
  // Norm 5 > 1: both scaled by 1/5, the direction kept.
  a.grad.data()[0] = 3;
  b.grad.data()[0] = -4;
  opt->Apply(1.0);
  EXPECT_DOUBLE_EQ(opt->last_grad_norm(), 5.0);
  EXPECT_FLOAT_EQ(a.value.data()[0], 1.0f - 0.6f);
  EXPECT_FLOAT_EQ(b.value.data()[0], 1.0f + 0.8f);
  // Norm 0.5 <= 1: untouched.
  a.grad.data()[0] = 0.3f;
  b.grad.data()[0] = 0.4f;
  opt->Apply(1.0);
  EXPECT_NEAR(opt->last_grad_norm(), 0.5, 1e-7);
  EXPECT_FLOAT_EQ(a.value.data()[0], 0.4f - 0.3f);
  EXPECT_FLOAT_EQ(b.value.data()[0], 1.8f - 0.4f);
}

TEST(OptimizerTest, StateNamesAndShapes) {
  Param a = Scalar();
  Param b;
  b.name = "dense/bias";
  b.value = Tensor({2, 3});
  b.grad = Tensor({2, 3});
  auto plain = Make(Sgd(0, false), {&a, &b});
  EXPECT_TRUE(plain->StateTensors().empty());
  auto momentum = Make(Sgd(0.5, false), {&a, &b});
  auto state = momentum->StateTensors();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state[0].first, "sgd/momentum/dense/kernel");
  EXPECT_EQ(state[1].first, "sgd/momentum/dense/bias");
  EXPECT_EQ(state[1].second->shape(), (Shape{2, 3}));
  // Pointers are stable across calls.
  EXPECT_EQ(momentum->StateTensors()[1].second, state[1].second);
}

TEST(OptimizerTest, MovingAveragesAreNotTheOptimizers) {
  OptimizerSpec spec;
  spec.type = OptimizerType::kAdam;
  spec.weight_decay = 0.5;
  spec.global_clipnorm = 1.0;
  Param w = Scalar();
  Param mean = Scalar();
  mean.name = "bn/moving_mean";
  mean.update = ParamUpdate::kMovingAverage;
  mean.momentum = 0.75f;
  std::unique_ptr<Optimizer> opt = Make(spec, {&w, &mean});
  // Slots only for the optimizer's own param.
  std::vector<std::string> names;
  for (const auto& [name, t] : opt->StateTensors()) names.push_back(name);
  EXPECT_THAT(names, ElementsAre("adam/m/dense/kernel", "adam/v/dense/kernel"));
  // The statistic is neither clipped, nor in the norm, nor decayed.
  w.grad.values() = {0.5f};
  mean.grad.values() = {100.0f};
  opt->Apply(0.1);
  EXPECT_DOUBLE_EQ(opt->last_grad_norm(), 0.5);
  EXPECT_EQ(mean.value.values(), std::vector<float>{1.0f});
  EXPECT_EQ(mean.grad.values(), std::vector<float>{100.0f});
  // Then: value * 0.75 + (grad / 8 samples) * 0.25 = 0.75 + 3.125.
  UpdateMovingAverages({&w, &mean}, 8);
  EXPECT_FLOAT_EQ(mean.value.values()[0], 3.875f);
  const float after_adam = w.value.values()[0];
  EXPECT_NE(after_adam, 1.0f);
  UpdateMovingAverages({&w, &mean}, 0);  // an empty step moves nothing
  EXPECT_FLOAT_EQ(mean.value.values()[0], 3.875f);
  EXPECT_EQ(w.value.values()[0], after_adam);
}

TEST(OptimizerTest, IterationsDriveBiasCorrection) {
  // Restoring iterations = 2 and m, v from step 2 gives the same step 3.
  OptimizerSpec s;
  Param p = Scalar();
  auto opt = Make(s, {&p});
  for (float g : {0.5f, -0.25f}) {
    p.grad.data()[0] = g;
    opt->Apply(0.01);
  }
  Param q = Scalar();
  q.value = p.value;
  auto restored = Make(s, {&q});
  auto src = opt->StateTensors();
  auto dst = restored->StateTensors();
  for (size_t i = 0; i < src.size(); ++i) *dst[i].second = *src[i].second;
  restored->set_iterations(opt->iterations());
  p.grad.data()[0] = q.grad.data()[0] = 1.0f;
  opt->Apply(0.01);
  restored->Apply(0.01);
  EXPECT_EQ(p.value.data()[0], q.value.data()[0]);
  EXPECT_EQ(restored->iterations(), 3);
}

TEST(OptimizerTest, DeterministicAcrossInstances) {
  for (OptimizerType type :
       {OptimizerType::kSgd, OptimizerType::kAdam, OptimizerType::kAdamW}) {
    OptimizerSpec s;
    s.type = type;
    s.momentum = 0.9;
    s.nesterov = true;
    s.weight_decay = type == OptimizerType::kAdamW ? 0.004 : 0.0;
    std::vector<Param> a(3), b(3);
    std::mt19937 rng(5);
    std::normal_distribution<float> normal;
    for (int k = 0; k < 3; ++k) {
      const Shape shape = {static_cast<int64_t>(k * 37 + 1)};  // uneven sizes
      a[k].name = b[k].name = "p" + std::to_string(k);
      a[k].value = Tensor(shape);
      for (float& x : a[k].value.values()) x = normal(rng);
      a[k].grad = Tensor(shape);
      b[k] = a[k];
    }
    auto oa = Make(s, {&a[0], &a[1], &a[2]});
    auto ob = Make(s, {&b[0], &b[1], &b[2]});
    for (int step = 0; step < 20; ++step) {
      for (int k = 0; k < 3; ++k) {
        for (float& x : a[k].grad.values()) x = normal(rng);
        b[k].grad = a[k].grad;
      }
      oa->Apply(0.01);
      ob->Apply(0.01);
    }
    for (int k = 0; k < 3; ++k) {
      ASSERT_EQ(0, std::memcmp(a[k].value.data(), b[k].value.data(),
                               sizeof(float) * a[k].value.size()));
    }
  }
}

TEST(OptimizerTest, MatchesDoubleReferenceOnAVector) {
  // A vectorized loop (n not a multiple of the vector width) against a
  // straightforward double-precision Adam.
  OptimizerSpec s;
  const int n = 1003;
  Param p;
  p.name = "w";
  p.value = Tensor({n});
  p.grad = Tensor({n});
  std::vector<double> w(n), m(n), v(n);
  for (int i = 0; i < n; ++i) w[i] = p.value.data()[i] = 0.001f * i - 0.5f;
  auto opt = Make(s, {&p});
  for (int t = 1; t <= 5; ++t) {
    for (int i = 0; i < n; ++i) p.grad.data()[i] = std::sin(0.1f * i * t);
    opt->Apply(0.002);
    const double alpha =
        0.002 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
    for (int i = 0; i < n; ++i) {
      const double g = p.grad.data()[i];
      m[i] += (g - m[i]) * 0.1;
      v[i] += (g * g - v[i]) * 0.001;
      w[i] -= alpha * m[i] / (std::sqrt(v[i]) + 1e-7);
    }
  }
  for (int i = 0; i < n; ++i) ASSERT_NEAR(p.value.data()[i], w[i], 1e-5) << i;
}

TEST(OptimizerTest, RejectsBadInput) {
  OptimizerSpec s;
  s.learning_rate = -1;
  Param p = Scalar();
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = Optimizer::Create(s, {&p});
  ASSERT_FALSE(opt.ok());
  EXPECT_EQ(opt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(opt.status().message(),
            "optimizer.learning_rate: must be > 0, got -1");

  p.grad = Tensor({2});
  opt = Optimizer::Create(OptimizerSpec(), {&p});
  ASSERT_FALSE(opt.ok());
  EXPECT_EQ(opt.status().message(),
            "optimizer: parameter dense/kernel has 1 values but 2 gradient "
            "elements");
}

TEST(OptimizerTest, EmptyParamsAndZeroSizedTensors) {
  auto none = Make(OptimizerSpec(), {});
  none->Apply(0.1);
  EXPECT_EQ(none->iterations(), 1);
  Param z;
  z.name = "z";
  z.value = Tensor({0});
  z.grad = Tensor({0});
  auto opt = Make(OptimizerSpec(), {&z});
  opt->Apply(0.1);
  EXPECT_EQ(opt->StateTensors().size(), 2u);
}

}  // namespace
}  // namespace lockstep

namespace lockstep {
namespace {

// Two ranks of a sharded optimizer: each updates the ranges it owns from
// the same gradients, with the clip norm's parts summed over both, and
// together they are the unsharded optimizer, bit for bit (the values and
// the state), for SGD with momentum, Adam and AdamW with weight decay and
// a clip norm that clips.
TEST(OptimizerShardTest, TwoRanksAreTheUnshardedOptimizerBitForBit) {
  for (OptimizerType type :
       {OptimizerType::kSgd, OptimizerType::kAdam, OptimizerType::kAdamW}) {
    OptimizerSpec s;
    s.type = type;
    s.momentum = 0.9;
    s.weight_decay = type == OptimizerType::kAdamW ? 0.004 : 0.0;
    s.global_clipnorm = 0.5;  // the random gradients' norm is ~10
    std::mt19937 rng(11);
    std::normal_distribution<float> normal;
    std::vector<Param> whole(3);
    for (int k = 0; k < 3; ++k) {
      const Shape shape = {static_cast<int64_t>(k * 41 + 3)};
      whole[k].name = "p" + std::to_string(k);
      whole[k].value = Tensor(shape);
      for (float& x : whole[k].value.values()) x = normal(rng);
      whole[k].grad = Tensor(shape);
    }
    std::vector<Param> rank[2] = {whole, whole};
    // Rank 0 owns p0, the first 20 of p1; rank 1 the rest of p1, and p2.
    const std::vector<ParamRange> owned[2] = {{{0, 0, 3}, {1, 0, 20}},
                                              {{1, 20, 24}, {2, 0, 85}}};
    auto ref = Make(s, {&whole[0], &whole[1], &whole[2]});
    std::unique_ptr<Optimizer> opt[2];
    for (int r = 0; r < 2; ++r) {
      auto o = Optimizer::Create(s, {&rank[r][0], &rank[r][1], &rank[r][2]},
                                 owned[r]);
      ASSERT_TRUE(o.ok()) << o.status();
      opt[r] = *std::move(o);
      EXPECT_TRUE(opt[r]->sharded());
      EXPECT_EQ(opt[r]->num_state_tensors(),
                type == OptimizerType::kSgd ? 3 : 6);
    }
    EXPECT_EQ(opt[0]->state_elements() + opt[1]->state_elements(),
              ref->state_elements());
    for (int step = 0; step < 10; ++step) {
      for (int k = 0; k < 3; ++k) {
        for (float& x : whole[k].grad.values()) x = normal(rng);
        rank[0][k].grad = rank[1][k].grad = whole[k].grad;
      }
      ref->Apply(0.01);
      // Each rank's part of the norm, then each rank applies with the sum
      // (what the ring's GatherSum gives both).
      float part[2][SquareSum::kWireFloats];
      for (int r = 0; r < 2; ++r) {
        SquareSum sum;
        for (const ParamRange& o : owned[r]) {
          sum.Add(rank[r][o.param].grad.data() + o.begin, o.size);
        }
        sum.ToWire(part[r]);
      }
      for (int r = 0; r < 2; ++r) {
        ASSERT_TRUE(opt[r]
                        ->Apply(0.01,
                                [&](float* values, int count) {
                                  EXPECT_EQ(count, SquareSum::kWireFloats);
                                  for (int i = 0; i < count; ++i) {
                                    values[i] = part[0][i] + part[1][i];
                                  }
                                  return absl::OkStatus();
                                })
                        .ok());
        EXPECT_EQ(opt[r]->last_grad_norm(), ref->last_grad_norm());
      }
      EXPECT_GT(ref->last_grad_norm(), 0.5);  // it clipped
    }
    for (int r = 0; r < 2; ++r) {
      for (const ParamRange& o : owned[r]) {
        ASSERT_EQ(0, std::memcmp(rank[r][o.param].value.data() + o.begin,
                                 whole[o.param].value.data() + o.begin,
                                 sizeof(float) * o.size))
            << "rank " << r << " param " << o.param;
      }
    }
    // The pieces are the unsharded state's elements, named alike.
    std::map<std::string, Tensor*> full;
    for (auto& [name, t] : ref->StateTensors()) full[name] = t;
    size_t pieces = 0;
    for (int r = 0; r < 2; ++r) {
      for (const StatePiece& p : opt[r]->StatePieces()) {
        ASSERT_EQ(full.count(p.name), 1u) << p.name;
        EXPECT_EQ(p.shape, full[p.name]->shape());
        ASSERT_EQ(0,
                  std::memcmp(p.data->data(), full[p.name]->data() + p.offset,
                              sizeof(float) * p.data->size()))
            << p.name;
        ++pieces;
      }
    }
    EXPECT_EQ(pieces, type == OptimizerType::kSgd ? 4u : 8u);
  }
}

TEST(OptimizerShardTest, ARankSumErrorUpdatesNothing) {
  OptimizerSpec s;
  s.global_clipnorm = 1.0;
  Param p = Scalar();
  p.grad.data()[0] = 3.0f;
  auto o = Optimizer::Create(s, {&p}, std::vector<ParamRange>{{0, 0, 1}});
  ASSERT_TRUE(o.ok());
  absl::Status st = (*o)->Apply(0.1, [](float*, int) {
    return absl::UnavailableError("rank 1 is gone");
  });
  EXPECT_EQ(st.message(), "rank 1 is gone");
  EXPECT_EQ(p.value.data()[0], 1.0f);
  EXPECT_EQ((*o)->iterations(), 0);
  EXPECT_FALSE(
      Optimizer::Create(s, {&p}, std::vector<ParamRange>{{0, 0, 2}}).ok());
}

}  // namespace
}  // namespace lockstep
