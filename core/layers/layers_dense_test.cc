// The dense layer built through the registry: gradients against finite
// differences for every activation, without bias, over positions in both
// naming conventions, and its initializers; dropout and flatten (which pass
// through), and the parameter initialisation they share.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "core/layers/dense.h"
#include "core/layers/registry.h"
#include "core/layers/test_util.h"
#include "core/param_init.h"
#include "gtest/gtest.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

using testing::BuildLayer;
using testing::GradCheck;
using testing::RandomVector;
using testing::RunForward;

TEST(LayersTest, DenseGradientsForEveryActivation) {
  SetNumThreads(2);
  for (const char* act :
       {"linear", "relu", "gelu", "tanh", "sigmoid", "softmax", "relu6"}) {
    std::unique_ptr<Layer> l = BuildLayer(
        std::string(R"({"type": "dense", "units": 5, "activation": ")") + act +
            "\"}",
        {{7}});
    ASSERT_NE(l, nullptr);
    // Non-zero biases so the bias path is exercised.
    for (float& b : l->params()[1]->value.values()) b = 0.1f;
    GradCheck(*l, 4, PassContext());
  }
}

TEST(LayersTest, DenseSkipSoftmaxLeavesLogits) {
  std::unique_ptr<Layer> l = BuildLayer(
      R"({"type": "dense", "units": 3, "activation": "softmax"})", {{2}});
  PassContext ctx;
  ctx.skip_output_activation = true;
  const std::vector<float> y = RunForward(*l, 1, ctx, {{1, 2}});
  const float* k = l->params()[0]->value.data();
  for (int j = 0; j < 3; ++j) EXPECT_FLOAT_EQ(y[j], k[j] + 2 * k[3 + j]);
  GradCheck(*l, 3, ctx);
}

TEST(LayersTest, DenseWithoutBias) {
  std::unique_ptr<Layer> l =
      BuildLayer(R"({"type": "dense", "units": 4, "use_bias": false})", {{3}});
  ASSERT_EQ(l->params().size(), 1u);
  GradCheck(*l, 2, PassContext());
}

TEST(LayersTest, DenseOverPositionsInBothLayouts) {
  // [5, 3] -> [5, 4] (each position through the same weights); PyTorch's
  // layout stores [4, 3] as "name.weight".
  for (ParamNaming naming : {ParamNaming::kKeras, ParamNaming::kTorch}) {
    std::unique_ptr<Layer> l = BuildLayer(
        R"({"type": "dense", "name": "proj", "units": 4, "activation": "tanh"})",
        {{5, 3}}, naming);
    EXPECT_EQ(l->output_shape(), (Shape{5, 4}));
    const bool torch = naming == ParamNaming::kTorch;
    EXPECT_EQ(l->params()[0]->name, torch ? "proj.weight" : "proj/kernel");
    EXPECT_EQ(l->params()[1]->name, torch ? "proj.bias" : "proj/bias");
    EXPECT_EQ(l->params()[0]->value.shape(),
              (torch ? Shape{4, 3} : Shape{3, 4}));
    for (float& b : l->params()[1]->value.values()) b = -0.2f;
    GradCheck(*l, 2, PassContext());
    // Position p of sample s is an independent row: y = tanh(x W + b).
    const std::vector<float> x = RandomVector(2 * 15, 3);
    const std::vector<float> y = RunForward(*l, 2, PassContext(), {x});
    const float* w = l->params()[0]->value.data();
    for (int r = 0; r < 10; ++r) {
      for (int j = 0; j < 4; ++j) {
        double z = -0.2;
        for (int i = 0; i < 3; ++i) {
          z += x[r * 3 + i] * (torch ? w[j * 3 + i] : w[i * 4 + j]);
        }
        EXPECT_NEAR(y[r * 4 + j], std::tanh(z), 1e-6);
      }
    }
  }
}

TEST(LayersTest, DenseInitializers) {
  std::unique_ptr<Layer> l = BuildLayer(
      R"({"type": "dense", "units": 300, "kernel_initializer":
          {"type": "truncated_normal", "stddev": 0.02}})",
      {{200}});
  double sum = 0, sq = 0, maxabs = 0;
  for (float v : l->params()[0]->value.values()) {
    sum += v;
    sq += double{v} * v;
    maxabs = std::max<double>(maxabs, std::fabs(v));
  }
  const double n = 60000;
  EXPECT_NEAR(sum / n, 0.0, 5e-4);
  // A normal truncated at 2 sigma has stddev 0.88 sigma.
  EXPECT_NEAR(std::sqrt(sq / n), 0.88 * 0.02, 1e-3);
  EXPECT_LE(maxabs, 0.04);
  EXPECT_GT(maxabs, 0.039);
}

TEST(LayersTest, DropoutGradientsAndPassThrough) {
  std::unique_ptr<Layer> l =
      BuildLayer(R"({"type": "dropout", "rate": 0.4})", {{3, 4}});
  PassContext train;
  train.training = true;
  train.dropout_seed = 99;
  EXPECT_FALSE(l->PassesThrough(train));
  EXPECT_TRUE(l->PassesThrough(PassContext()));
  GradCheck(*l, 5, train);
}

TEST(LayersTest, FlattenIsAReshape) {
  std::unique_ptr<Layer> l = BuildLayer(R"({"type": "flatten"})", {{3, 4, 2}});
  EXPECT_EQ(l->output_shape(), (Shape{24}));
  EXPECT_TRUE(l->PassesThrough(PassContext()));
}

TEST(ParamInitTest, GlorotBoundsAndDeterminism) {
  std::vector<float> a(5000), b(5000), c(5000);
  GlorotUniform(1, 30, 20, a.data(), a.size());
  GlorotUniform(1, 30, 20, b.data(), b.size());
  GlorotUniform(2, 30, 20, c.data(), c.size());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  const float limit = std::sqrt(6.0f / 50);
  double sum = 0, maxabs = 0;
  for (float v : a) {
    ASSERT_LE(std::fabs(v), limit);
    sum += v;
    maxabs = std::max<double>(maxabs, std::fabs(v));
  }
  EXPECT_NEAR(sum / a.size(), 0.0, 0.02);
  EXPECT_GT(maxabs, 0.95 * limit);  // fills the range
  // The exact stream is part of the format: pin the first draw.
  SplitMix64 rng(0);
  EXPECT_EQ(rng.Next(), 0xE220A8397B1DCDAFull);
  EXPECT_NE(LayerSeed(1, 0), LayerSeed(1, 1));
  EXPECT_NE(LayerSeed(1, 0), LayerSeed(2, 0));
}

}  // namespace
}  // namespace lockstep
