// The image layers built through the registry: conv2d (explicit padding,
// groups, shapes and errors), global average pooling, depthwise conv2d,
// both kernel layouts, and max pooling; gradients against finite
// differences.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/layers/registry.h"
#include "core/layers/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

using testing::BuildError;
using testing::BuildLayer;
using testing::GradCheck;
using testing::RandomVector;
using testing::RunForward;

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

// A dilated conv2d (PyTorch's dilation, Keras' dilation_rate): its output
// shape, finite-difference gradients, the field written back only when
// set, and a kernel whose span outgrows the input refused.
TEST(LayersTest, DilatedConvShapesGradientsAndFields) {
  std::unique_ptr<Layer> l = BuildLayer(
      R"({"type": "conv2d", "filters": 2, "kernel_size": 3,
          "dilation_rate": [2, 1], "padding": [2, 1]})",
      {{6, 5, 2}});
  EXPECT_EQ(l->output_shape(), (Shape{6, 5, 2}));
  GradCheck(*l, 2, PassContext());
  std::unique_ptr<Layer> v = BuildLayer(
      R"({"type": "conv2d", "filters": 1, "kernel_size": 2,
          "dilation_rate": 3, "strides": 2})",
      {{7, 7, 1}});
  EXPECT_EQ(v->output_shape(), (Shape{2, 2, 1}));
  GradCheck(*v, 2, PassContext());
  EXPECT_THAT(BuildError(R"({"type": "conv2d", "filters": 1, "kernel_size": 3,
                             "dilation_rate": 3})",
                         {{6, 6, 1}}),
              ::testing::HasSubstr("kernel_size [7, 7] is larger than its "
                                   "input [6, 6, 1]"));
  EXPECT_THAT(BuildError(R"({"type": "conv2d", "filters": 1, "kernel_size": 3,
                             "dilation_rate": 0})",
                         {{6, 6, 1}}),
              ::testing::HasSubstr("dilation_rate"));
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

// average_pooling2d: its output shape, finite-difference gradients with
// the pads counted in the divisor and not, its fields written back, and
// the refusals it shares with max_pool2d naming it.
TEST(LayersTest, AveragePoolGradientsPaddingAndRefusals) {
  std::unique_ptr<Layer> l = BuildLayer(
      R"({"type": "average_pooling2d", "pool_size": 3, "strides": 2,
          "padding": 1})",
      {{6, 5, 2}});
  EXPECT_EQ(l->output_shape(), (Shape{3, 3, 2}));
  GradCheck(*l, 2, PassContext());
  std::unique_ptr<Layer> e = BuildLayer(
      R"({"type": "average_pooling2d", "pool_size": 2, "strides": 1,
          "padding": [1, 0], "count_include_pad": false})",
      {{4, 4, 3}});
  EXPECT_EQ(e->output_shape(), (Shape{5, 3, 3}));
  GradCheck(*e, 2, PassContext());
  // The first window (a padded row over two real cells) is their mean when
  // the pads do not count, and a quarter of their sum when they do.
  std::vector<float> x(16 * 3, 0.0f);
  x[0] = 8.0f;
  EXPECT_FLOAT_EQ(RunForward(*e, 1, PassContext(), {x})[0], 4.0f);
  std::unique_ptr<Layer> counted = BuildLayer(
      R"({"type": "average_pooling2d", "pool_size": 2, "strides": 1,
          "padding": [1, 0]})",
      {{4, 4, 3}});
  EXPECT_FLOAT_EQ(RunForward(*counted, 1, PassContext(), {x})[0], 2.0f);
  EXPECT_THAT(BuildError(R"({"type": "average_pooling2d", "padding": "same"})",
                         {{4, 4, 1}}),
              ::testing::HasSubstr("padding \"same\" is not implemented for "
                                   "average_pooling2d"));
  EXPECT_THAT(BuildError(R"({"type": "average_pooling2d", "pool_size": 2,
                             "padding": 2})",
                         {{4, 4, 1}}),
              ::testing::HasSubstr("more than half of pool_size"));
  EXPECT_THAT(BuildError(R"({"type": "max_pool2d", "count_include_pad": true})",
                         {{4, 4, 1}}),
              ::testing::HasSubstr("count_include_pad"));
}

}  // namespace
}  // namespace lockstep
