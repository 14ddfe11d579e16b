// The stack layers built through the registry: parameter and input
// gradients against finite differences, shapes, names in both naming
// conventions, pass-through, and initialisation.
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

using testing::BuildError;
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

struct ConvCase {
  int64_t h, w, c, kh, kw, f, sh, sw;
  const char* pad;
  const char* act;
};

TEST(LayersTest, Conv2DGradients) {
  for (int threads : {1, 2}) {
    SetNumThreads(threads);
    for (const ConvCase& cc :
         {ConvCase{6, 5, 2, 3, 3, 3, 1, 1, "valid", "tanh"},
          ConvCase{6, 5, 2, 3, 3, 3, 1, 1, "same", "linear"},
          ConvCase{7, 8, 3, 3, 2, 2, 2, 2, "same", "sigmoid"},
          ConvCase{7, 7, 1, 3, 3, 2, 2, 2, "valid", "relu"},
          ConvCase{4, 4, 3, 1, 1, 2, 1, 1, "valid", "linear"}}) {
      const std::string json =
          "{\"type\": \"conv2d\", \"filters\": " + std::to_string(cc.f) +
          ", \"kernel_size\": [" + std::to_string(cc.kh) + ", " +
          std::to_string(cc.kw) + "], \"strides\": [" + std::to_string(cc.sh) +
          ", " + std::to_string(cc.sw) + "], \"padding\": \"" + cc.pad +
          "\", \"activation\": \"" + cc.act + "\"}";
      std::unique_ptr<Layer> l = BuildLayer(json, {{cc.h, cc.w, cc.c}});
      for (float& b : l->params()[1]->value.values()) b = 0.05f;
      GradCheck(*l, 2, PassContext());
    }
  }
}

// Explicit padding (PyTorch's padding=N) is a valid convolution of the
// input with N zero rows and columns added on each side.
TEST(LayersTest, ExplicitPaddingIsValidOverTheZeroPaddedInput) {
  const int64_t h = 6, w = 5, c = 2, n = 2;
  const std::vector<float> x = RandomVector(n * h * w * c, 31);
  std::vector<float> padded(n * (h + 2) * (w + 4) * c, 0.0f);
  for (int64_t s = 0; s < n; ++s) {
    for (int64_t i = 0; i < h; ++i) {
      for (int64_t j = 0; j < w; ++j) {
        for (int64_t k = 0; k < c; ++k) {
          padded[((s * (h + 2) + i + 1) * (w + 4) + j + 2) * c + k] =
              x[((s * h + i) * w + j) * c + k];
        }
      }
    }
  }
  for (const char* type : {"conv2d", "depthwise_conv2d"}) {
    const std::string fields =
        std::string(R"({"type": ")") + type + R"(", "kernel_size": 3,
        "strides": 2, "activation": "relu6")" +
        (std::string(type) == "conv2d" ? R"(, "filters": 3)" : "");
    std::unique_ptr<Layer> explicit_pad =
        BuildLayer(fields + R"(, "padding": [1, 2]})", {{h, w, c}});
    std::unique_ptr<Layer> valid =
        BuildLayer(fields + "}", {{h + 2, w + 4, c}});
    ASSERT_NE(explicit_pad, nullptr);
    ASSERT_NE(valid, nullptr);
    EXPECT_EQ(explicit_pad->output_shape(), valid->output_shape()) << type;
    EXPECT_EQ(explicit_pad->output_shape()[0], 3) << type;  // (6+2-3)/2+1
    EXPECT_EQ(explicit_pad->output_shape()[1], 4) << type;  // (5+4-3)/2+1
    for (size_t k = 0; k < valid->params().size(); ++k) {
      valid->params()[k]->value.values() =
          explicit_pad->params()[k]->value.values();
    }
    EXPECT_EQ(RunForward(*explicit_pad, n, PassContext(), {x}),
              RunForward(*valid, n, PassContext(), {padded}))
        << type;
    std::printf("%s explicit\n", type);
    GradCheck(*explicit_pad, n, PassContext(), {x}, {true});
    std::printf("%s valid\n", type);
    GradCheck(*valid, n, PassContext(), {padded}, {true});
  }
  std::unique_ptr<Layer> one = BuildLayer(
      R"({"type": "conv2d", "filters": 1, "kernel_size": 3, "padding": 1})",
      {{4, 4, 1}});
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->output_shape(), (Shape{4, 4, 1}));
  EXPECT_EQ(BuildError(R"({"type": "conv2d", "filters": 1, "kernel_size": 5,
                           "padding": [1, 0]})",
                       {{4, 4, 1}}),
            "layer (l): kernel_size [5, 5] is larger than its input [4, 4, 1] "
            "with padding [1, 0]");
  EXPECT_EQ(BuildError(R"({"type": "conv2d", "filters": 1, "kernel_size": 3,
                           "padding": [1, 2, 3]})",
                       {{4, 4, 1}}),
            "layer.padding: must be \"valid\", \"same\", or pixels on each "
            "side: N or [H, W] (N >= 0), got [1,2,3]");
  EXPECT_EQ(BuildError(R"({"type": "depthwise_conv2d", "kernel_size": 3,
                           "padding": -1})",
                       {{4, 4, 1}}),
            "layer.padding: must be an integer in [0, 1048576], got -1");
}

// groups: each group of channels through its own filters. Equal to the
// groups as separate convolutions, concatenated; gradients by finite
// differences; in both kernel layouts.
TEST(LayersTest, GroupedConvIsSeparateConvsConcatenated) {
  const int64_t h = 5, w = 6, c = 4, n = 2;
  const std::vector<float> x = RandomVector(n * h * w * c, 41);
  std::unique_ptr<Layer> grouped = BuildLayer(
      R"({"type": "conv2d", "filters": 6, "kernel_size": 3, "padding": 1,
          "groups": 2, "activation": "tanh"})",
      {{h, w, c}});
  ASSERT_NE(grouped, nullptr);
  EXPECT_EQ(grouped->params()[0]->value.shape(), (Shape{3, 3, 2, 6}));
  for (float& b : grouped->params()[1]->value.values()) b = 0.1f;
  const std::vector<float> y = RunForward(*grouped, n, PassContext(), {x});
  const std::vector<float>& k = grouped->params()[0]->value.values();
  for (int64_t grp = 0; grp < 2; ++grp) {
    std::unique_ptr<Layer> one = BuildLayer(
        R"({"type": "conv2d", "filters": 3, "kernel_size": 3, "padding": 1,
            "activation": "tanh"})",
        {{h, w, 2}});
    ASSERT_NE(one, nullptr);
    std::vector<float>& k1 = one->params()[0]->value.values();
    for (int64_t t = 0; t < 9; ++t) {
      for (int64_t ci = 0; ci < 2; ++ci) {
        for (int64_t f = 0; f < 3; ++f) {
          k1[(t * 2 + ci) * 3 + f] = k[(t * 2 + ci) * 6 + grp * 3 + f];
        }
      }
    }
    for (float& b : one->params()[1]->value.values()) b = 0.1f;
    std::vector<float> xg;
    for (int64_t p = 0; p < n * h * w; ++p) {
      xg.push_back(x[p * c + grp * 2]);
      xg.push_back(x[p * c + grp * 2 + 1]);
    }
    const std::vector<float> yg = RunForward(*one, n, PassContext(), {xg});
    for (int64_t p = 0; p < n * h * w; ++p) {
      for (int64_t f = 0; f < 3; ++f) {
        ASSERT_EQ(y[p * 6 + grp * 3 + f], yg[p * 3 + f]) << grp << " " << p;
      }
    }
  }
  GradCheck(*grouped, n, PassContext(), {x}, {true});
  std::unique_ptr<Layer> torch = BuildLayer(
      R"({"type": "conv2d", "filters": 6, "kernel_size": 3, "groups": 2})",
      {{h, w, c}}, ParamNaming::kTorch);
  ASSERT_NE(torch, nullptr);
  EXPECT_EQ(torch->params()[0]->value.shape(), (Shape{6, 2, 3, 3}));
  GradCheck(*torch, n, PassContext(), {x}, {true});
  EXPECT_EQ(BuildError(R"({"type": "conv2d", "filters": 6, "kernel_size": 3,
                           "groups": 3})",
                       {{h, w, c}}),
            "layer (l): groups 3 must divide both the input's channels (4) "
            "and filters (6)");
}

TEST(LayersTest, Conv2DShapesAndErrors) {
  EXPECT_EQ(BuildLayer(R"({"type": "conv2d", "filters": 8, "kernel_size": 3})",
                       {{28, 28, 1}})
                ->output_shape(),
            (Shape{26, 26, 8}));
  EXPECT_EQ(BuildLayer(R"({"type": "conv2d", "filters": 8, "kernel_size": 3,
                           "strides": 2, "padding": "same"})",
                       {{28, 27, 1}})
                ->output_shape(),
            (Shape{14, 14, 8}));
  EXPECT_EQ(BuildError(R"({"type": "conv2d", "filters": 8, "kernel_size": 3,
                           "activation": "gelu"})",
                       {{28, 28, 1}}),
            "layer (l): activation \"gelu\" is for dense layers");
}

TEST(LayersTest, GlobalAveragePoolingShapesGradientsAndErrors) {
  std::unique_ptr<Layer> l =
      BuildLayer(R"({"type": "global_average_pooling2d"})", {{5, 4, 3}});
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->output_shape(), (Shape{3}));
  EXPECT_TRUE(l->params().empty());
  GradCheck(*l, 2, PassContext());
  std::unique_ptr<Layer> kept = BuildLayer(
      R"({"type": "global_average_pooling2d", "keepdims": true})", {{2, 2, 2}});
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->output_shape(), (Shape{1, 1, 2}));
  // Sample of 2x2 positions, 2 channels: (1, -1), (2, -2), (3, -3), (6, 0).
  const std::vector<float> y =
      RunForward(*kept, 1, PassContext(), {{1, -1, 2, -2, 3, -3, 6, 0}});
  EXPECT_EQ(y, (std::vector<float>{3.0f, -1.5f}));
  EXPECT_EQ(BuildError(R"({"type": "global_average_pooling2d"})", {{64}}),
            "layer (l): expects an image input [height, width, channels], "
            "got [64]; image layers must come before flatten and dense");
  EXPECT_EQ(BuildError(
                R"({"type": "global_average_pooling2d", "keepdims": 1})",
                {{2, 2, 2}}),
            "layer.keepdims: must be true or false, got 1");
}

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

TEST(LayersTest, DepthwiseConvShapesGradientsAndErrors) {
  // Stride 2, same padding: [7, 6, 3] -> [4, 3, 3].
  std::unique_ptr<Layer> l = BuildLayer(
      R"({"type": "depthwise_conv2d", "kernel_size": 3, "strides": 2,
          "padding": "same", "activation": "relu6"})",
      {{7, 6, 3}});
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->output_shape(), (Shape{4, 3, 3}));
  ASSERT_EQ(l->params().size(), 2u);
  EXPECT_EQ(l->params()[0]->name, "l/depthwise_kernel");
  EXPECT_EQ(l->params()[0]->value.shape(), (Shape{3, 3, 3, 1}));
  for (float& b : l->params()[1]->value.values()) b = 0.1f;
  GradCheck(*l, 2, PassContext());
  // A multiplier of 2, valid padding, no bias: [5, 5, 2] -> [3, 3, 4].
  std::unique_ptr<Layer> m = BuildLayer(
      R"({"type": "depthwise_conv2d", "kernel_size": 3,
          "depth_multiplier": 2, "use_bias": false})",
      {{5, 5, 2}});
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->output_shape(), (Shape{3, 3, 4}));
  EXPECT_EQ(m->params()[0]->value.shape(), (Shape{3, 3, 2, 2}));
  GradCheck(*m, 2, PassContext());
  EXPECT_EQ(BuildError(R"({"type": "depthwise_conv2d", "kernel_size": 5})",
                       {{4, 4, 3}}),
            "layer (l): kernel_size [5, 5] is larger than its input [4, 4, 3] "
            "with padding \"valid\"; use padding \"same\" or a smaller "
            "kernel");
  EXPECT_EQ(BuildError(R"({"type": "depthwise_conv2d", "strides": 2})",
                       {{4, 4, 3}}),
            "layer.kernel_size: required for a depthwise_conv2d layer");
}

// With param_names "torch" the kernels are PyTorch's [F, C, KH, KW] (a
// depthwise one [C*M, 1, KH, KW]) under torch names; the same seed gives the
// same function as the Keras layout, and the same gradients, permuted.
TEST(LayersTest, ConvKernelsInPyTorchLayout) {
  struct Case {
    const char* json;
    Shape torch_shape;
  };
  for (const Case& c : {Case{R"({"type": "conv2d", "filters": 4,
                                 "kernel_size": [3, 2], "strides": 2,
                                 "padding": "same", "activation": "relu6"})",
                             Shape{4, 3, 3, 2}},
                        Case{R"({"type": "depthwise_conv2d", "kernel_size": 3,
                                 "depth_multiplier": 2, "padding": "same",
                                 "activation": "tanh"})",
                             Shape{6, 1, 3, 3}}}) {
    std::unique_ptr<Layer> keras = BuildLayer(c.json, {{6, 5, 3}});
    std::unique_ptr<Layer> torch =
        BuildLayer(c.json, {{6, 5, 3}}, ParamNaming::kTorch);
    ASSERT_NE(keras, nullptr);
    ASSERT_NE(torch, nullptr);
    EXPECT_EQ(torch->params()[0]->name, "l.weight");
    EXPECT_EQ(torch->params()[1]->name, "l.bias");
    EXPECT_EQ(torch->params()[0]->value.shape(), c.torch_shape);
    const Shape& ks = keras->params()[0]->value.shape();  // [KH, KW, C, M|F]
    const int64_t f = c.torch_shape[0], ci = c.torch_shape[1];
    const int64_t khw = ks[0] * ks[1];
    // The torch kernel is the Keras one, permuted.
    const float* kv = keras->params()[0]->value.data();
    const float* tv = torch->params()[0]->value.data();
    for (int64_t fi = 0; fi < f; ++fi)
      for (int64_t cc = 0; cc < ci; ++cc)
        for (int64_t t = 0; t < khw; ++t) {
          ASSERT_EQ(tv[(fi * ci + cc) * khw + t], kv[(t * ci + cc) * f + fi]);
        }
    const std::vector<float> x = RandomVector(2 * 6 * 5 * 3, 8);
    EXPECT_EQ(RunForward(*keras, 2, PassContext(), {x}),
              RunForward(*torch, 2, PassContext(), {x}));
    GradCheck(*torch, 2, PassContext());
  }
}

TEST(LayersTest, MaxPoolGradientsAndStrides) {
  std::unique_ptr<Layer> l =
      BuildLayer(R"({"type": "max_pool2d", "pool_size": [2, 3]})", {{5, 7, 2}});
  EXPECT_EQ(l->output_shape(), (Shape{2, 2, 2}));
  GradCheck(*l, 3, PassContext());
  // Overlapping windows (strides below the pool size) route every gradient.
  std::unique_ptr<Layer> o = BuildLayer(
      R"({"type": "max_pool2d", "pool_size": 3, "strides": 1})", {{5, 5, 1}});
  EXPECT_EQ(o->output_shape(), (Shape{3, 3, 1}));
  GradCheck(*o, 2, PassContext(), {RandomVector(50, 4, -2, 2)}, {true}, 2e-3,
            5e-4f);
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
