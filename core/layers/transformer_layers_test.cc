// The text-model layers built through the registry: add, gelu, embedding,
// position_embedding, layer_norm, gather_positions and multi_head_attention.
// Forward values against direct formulas (double precision), parameter and
// input gradients against central differences, parameter names in both
// conventions, and the errors a bad shape gives.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/layers/registry.h"
#include "core/layers/test_util.h"
#include "gtest/gtest.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

using testing::BuildError;
using testing::BuildLayer;
using testing::GradCheck;
using testing::RandomVector;
using testing::RunForward;

std::vector<std::string> Names(Layer& l) {
  std::vector<std::string> out;
  for (Param* p : l.params()) out.push_back(p->name);
  return out;
}

void Randomize(Layer& l, uint32_t seed, float scale = 0.5f) {
  for (Param* p : l.params()) {
    p->value.values() = RandomVector(p->value.size(), seed++, -scale, scale);
  }
}

TEST(TransformerLayersTest, AddSumsAndPassesTheGradientToEveryInput) {
  std::unique_ptr<Layer> l = BuildLayer(R"({"type": "add", "inputs": ["in0", "in1", "in2"]})",
                 {{2, 3}, {2, 3}, {2, 3}});
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->output_shape(), (Shape{2, 3}));
  const std::vector<float> a = RandomVector(12, 1), b = RandomVector(12, 2),
                           c = RandomVector(12, 3);
  const std::vector<float> y = RunForward(*l, 2, PassContext(), {a, b, c});
  for (int i = 0; i < 12; ++i) EXPECT_FLOAT_EQ(y[i], a[i] + b[i] + c[i]);
  GradCheck(*l, 2, PassContext(), {a, b, c}, {true, true, true});
  EXPECT_EQ(BuildError(R"({"type": "add"})", {{2, 3}, {2, 3}}),
            "layer.inputs: required for a add layer (it takes at least 2 "
            "inputs)");
  EXPECT_EQ(BuildError(R"({"type": "add", "inputs": ["in0", "in1"]})",
                       {{2, 3}, {3, 2}}),
            "layer (l): inputs in0 [2, 3] and in1 [3, 2] differ in shape; add "
            "needs one shape");
}

TEST(TransformerLayersTest, GeluIsTheErfForm) {
  std::unique_ptr<Layer> l = BuildLayer(R"({"type": "gelu"})", {{4}});
  // 0.5 x (1 + erf(x / sqrt 2)) at known points.
  const std::vector<float> y =
      RunForward(*l, 1, PassContext(), {{-3.0f, -1.0f, 0.5f, 2.0f}});
  const double expect[] = {-0.0040496598, -0.1586552539, 0.3457312306,
                           1.9544997361};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], expect[i], 2e-6) << i;
  GradCheck(*l, 3, PassContext());
}

TEST(TransformerLayersTest, EmbeddingGathersRowsAndScattersGradients) {
  for (ParamNaming naming : {ParamNaming::kKeras, ParamNaming::kTorch}) {
    std::unique_ptr<Layer> l = BuildLayer(
        R"({"type": "embedding", "name": "tok", "input_dim": 5,
            "output_dim": 3})",
        {{4}}, naming);
    ASSERT_NE(l, nullptr);
    EXPECT_EQ(l->output_shape(), (Shape{4, 3}));
    EXPECT_EQ(Names(*l), std::vector<std::string>{
                             naming == ParamNaming::kTorch ? "tok.weight"
                                                           : "tok/embeddings"});
    EXPECT_EQ(l->params()[0]->value.shape(), (Shape{5, 3}));
    // Id 2 twice in a sample, 4 across samples; 7 and 1.5 are not ids and
    // read as zero vectors.
    const std::vector<float> ids = {2, 0, 2, 4, 4, 7, 1.5f, 3};
    const std::vector<float> y = RunForward(*l, 2, PassContext(), {ids});
    const float* t = l->params()[0]->value.data();
    for (int i = 0; i < 8; ++i) {
      for (int c = 0; c < 3; ++c) {
        const float expect = (i == 5 || i == 6)
                                 ? 0.0f
                                 : t[static_cast<int>(ids[i]) * 3 + c];
        EXPECT_EQ(y[i * 3 + c], expect) << i;
      }
    }
    GradCheck(*l, 2, PassContext(), {ids}, {false});
  }
}

TEST(TransformerLayersTest, PositionEmbeddingAddsRowsByPosition) {
  std::unique_ptr<Layer> l = BuildLayer(
      R"({"type": "position_embedding", "max_length": 6, "output_dim": 2})",
      {{4}});
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->output_shape(), (Shape{4, 2}));
  EXPECT_EQ(l->params()[0]->value.shape(), (Shape{6, 2}));
  // The values of the input do not matter: sample s gets rows 0..3.
  const std::vector<float> y =
      RunForward(*l, 2, PassContext(), {{9, 9, 9, 9, 1, 2, 3, 4}});
  const float* t = l->params()[0]->value.data();
  for (int s = 0; s < 2; ++s) {
    for (int k = 0; k < 8; ++k) EXPECT_EQ(y[s * 8 + k], t[k]);
  }
  GradCheck(*l, 2, PassContext(), {std::vector<float>(8, 0.0f)}, {false});
  EXPECT_EQ(
      BuildError(
          R"({"type": "position_embedding", "max_length": 3, "output_dim": 2})",
          {{4}}),
      "layer (l): its input has 4 positions, more than max_length 3 (a "
      "sequence longer than the model's max_positions: shorten "
      "data.sequence_length)");
}

TEST(TransformerLayersTest, LayerNormNormalizesEachRow) {
  for (ParamNaming naming : {ParamNaming::kKeras, ParamNaming::kTorch}) {
    std::unique_ptr<Layer> l = BuildLayer(
        R"({"type": "layer_norm", "name": "ln", "epsilon": 1e-5})", {{3, 6}},
        naming);
    ASSERT_NE(l, nullptr);
    EXPECT_EQ(Names(*l), (naming == ParamNaming::kTorch
                              ? std::vector<std::string>{"ln.weight", "ln.bias"}
                              : std::vector<std::string>{"ln/gamma",
                                                         "ln/beta"}));
    // gamma starts at 1, beta at 0: every row has mean 0 and variance
    // 1 / (1 + eps / var).
    const std::vector<float> x = RandomVector(2 * 18, 4, -3, 3);
    const std::vector<float> y = RunForward(*l, 2, PassContext(), {x});
    for (int r = 0; r < 6; ++r) {
      double mean = 0, var = 0, mean_y = 0, var_y = 0;
      for (int c = 0; c < 6; ++c) mean += x[r * 6 + c] / 6.0;
      for (int c = 0; c < 6; ++c) {
        var += (x[r * 6 + c] - mean) * (x[r * 6 + c] - mean) / 6.0;
        mean_y += y[r * 6 + c] / 6.0;
      }
      for (int c = 0; c < 6; ++c) {
        EXPECT_NEAR(y[r * 6 + c], (x[r * 6 + c] - mean) / std::sqrt(var + 1e-5),
                    1e-5);
        var_y += y[r * 6 + c] * y[r * 6 + c] / 6.0;
      }
      EXPECT_NEAR(mean_y, 0.0, 1e-6);
      EXPECT_NEAR(var_y, var / (var + 1e-5), 1e-5);
    }
    Randomize(*l, 9);
    GradCheck(*l, 2, PassContext());
  }
}

TEST(TransformerLayersTest, LayerNormGradientsDoNotDependOnThreads) {
  std::unique_ptr<Layer> l =
      BuildLayer(R"({"type": "layer_norm"})", {{100, 16}});
  Randomize(*l, 3);
  const std::vector<float> x = RandomVector(3 * 1600, 5);
  const std::vector<float> dy0 = RandomVector(3 * 1600, 6);
  std::vector<std::vector<float>> grads;
  for (int threads : {1, 2}) {
    SetNumThreads(threads);
    std::vector<float> y(x.size()), dy = dy0, dx(x.size());
    LayerIO io;
    io.n = 3;
    io.x = {x.data()};
    io.y = y.data();
    for (Param* p : l->params()) {
      p->grad.SetZero();
      io.w.push_back(p->value.data());
      io.dw.push_back(p->grad.data());
    }
    l->Forward(io, PassContext());
    io.dy = dy.data();
    io.dx = {dx.data()};
    l->Backward(io, PassContext());
    grads.push_back(l->params()[0]->grad.values());
  }
  SetNumThreads(2);
  EXPECT_EQ(grads[0], grads[1]);  // bit for bit
}

TEST(TransformerLayersTest, GatherPositionsPicksRows) {
  std::unique_ptr<Layer> l =
      BuildLayer(R"({"type": "gather_positions", "inputs": ["in0", "in1"]})", {{5, 3}, {2}});
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->output_shape(), (Shape{2, 3}));
  const std::vector<float> x = RandomVector(2 * 15, 7);
  // Sample 0 picks rows 4 and 1; sample 1 row 1 twice... and -1 (a padded
  // prediction slot) gives zeros.
  const std::vector<float> pos = {4, 1, 1, -1};
  const std::vector<float> y = RunForward(*l, 2, PassContext(), {x, pos});
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(y[c], x[4 * 3 + c]);
    EXPECT_EQ(y[3 + c], x[1 * 3 + c]);
    EXPECT_EQ(y[6 + c], x[15 + 1 * 3 + c]);
    EXPECT_EQ(y[9 + c], 0.0f);
  }
  GradCheck(*l, 2, PassContext(), {x, {4, 1, 1, 1}}, {true, false});
  GradCheck(*l, 2, PassContext(), {x, pos}, {true, false});
  EXPECT_EQ(BuildError(R"({"type": "gather_positions", "inputs": ["in0", "in1"]})", {{5, 3}, {2, 1}}),
            "layer (l): takes a sequence [length, width] and positions "
            "[count], got [5, 3] and [2, 1]");
}

// Attention in double precision from the layer's own weights (Keras
// layout: [width, inner] kernels).
std::vector<double> ReferenceAttention(Layer& l, int n, int len, int width,
                                       int heads, const std::vector<float>& x,
                                       const float* mask) {
  const int d = width / heads;
  std::vector<Param*> p = l.params();
  auto project = [&](const std::vector<double>& in, int rows, int from,
                     int to, const Param* w, const Param* b) {
    std::vector<double> out(rows * to);
    for (int r = 0; r < rows; ++r) {
      for (int j = 0; j < to; ++j) {
        double s = b->value.data()[j];
        for (int i = 0; i < from; ++i) {
          s += in[r * from + i] * w->value.data()[i * to + j];
        }
        out[r * to + j] = s;
      }
    }
    return out;
  };
  const std::vector<double> xd(x.begin(), x.end());
  const int rows = n * len;
  const std::vector<double> q = project(xd, rows, width, width, p[0], p[1]);
  const std::vector<double> k = project(xd, rows, width, width, p[2], p[3]);
  const std::vector<double> v = project(xd, rows, width, width, p[4], p[5]);
  std::vector<double> ctx(rows * width, 0.0);
  for (int s = 0; s < n; ++s) {
    for (int h = 0; h < heads; ++h) {
      for (int i = 0; i < len; ++i) {
        std::vector<double> score(len);
        double mx = -1e300;
        for (int j = 0; j < len; ++j) {
          double dot = 0;
          for (int c = 0; c < d; ++c) {
            dot += q[(s * len + i) * width + h * d + c] *
                   k[(s * len + j) * width + h * d + c];
          }
          score[j] = dot / std::sqrt(static_cast<double>(d));
          if (mask == nullptr || mask[s * len + j] != 0) {
            mx = std::max(mx, score[j]);
          }
        }
        double sum = 0;
        for (int j = 0; j < len; ++j) {
          score[j] = (mask != nullptr && mask[s * len + j] == 0)
                         ? 0.0
                         : std::exp(score[j] - mx);
          sum += score[j];
        }
        for (int j = 0; j < len; ++j) {
          for (int c = 0; c < d; ++c) {
            ctx[(s * len + i) * width + h * d + c] +=
                score[j] / sum * v[(s * len + j) * width + h * d + c];
          }
        }
      }
    }
  }
  return project(ctx, rows, width, width, p[6], p[7]);
}

TEST(TransformerLayersTest, AttentionMatchesTheFormulaWithAPaddingMask) {
  std::unique_ptr<Layer> l = BuildLayer(
      R"({"type": "multi_head_attention", "num_heads": 2, "dropout": 0.1})",
      {{4, 6}, {4}});
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->output_shape(), (Shape{4, 6}));
  Randomize(*l, 21);
  const std::vector<float> x = RandomVector(2 * 24, 8);
  // Sample 0: two tokens then padding; sample 1: all four tokens.
  const std::vector<float> mask = {1, 1, 0, 0, 1, 1, 1, 1};
  // Inference: no dropout.
  const std::vector<float> y = RunForward(*l, 2, PassContext(), {x, mask});
  const std::vector<double> ref =
      ReferenceAttention(*l, 2, 4, 6, 2, x, mask.data());
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], ref[i], 2e-5) << i;
  // A padded key changes nothing for any query.
  std::vector<float> x2 = x;
  for (int c = 0; c < 6; ++c) x2[3 * 6 + c] += 5.0f;
  const std::vector<float> y2 = RunForward(*l, 2, PassContext(), {x2, mask});
  for (int i = 0; i < 3 * 6; ++i) EXPECT_FLOAT_EQ(y2[i], y[i]) << i;
}

TEST(TransformerLayersTest, AttentionGradients) {
  const std::vector<float> mask = {1, 1, 1, 0, 1, 0, 1, 1};
  for (ParamNaming naming : {ParamNaming::kKeras, ParamNaming::kTorch}) {
    std::unique_ptr<Layer> l = BuildLayer(
        R"({"type": "multi_head_attention", "num_heads": 2, "dropout": 0.25})",
        {{4, 6}, {4}}, naming);
    ASSERT_NE(l, nullptr);
    Randomize(*l, 31);
    const std::vector<float> x = RandomVector(2 * 24, 9);
    // Inference, then training with a fixed dropout mask.
    GradCheck(*l, 2, PassContext(), {x, mask}, {true, false});
    PassContext train;
    train.training = true;
    train.dropout_seed = 77;
    GradCheck(*l, 2, train, {x, mask}, {true, false});
  }
  // Without a mask, with key_dim != width / heads and no biases.
  std::unique_ptr<Layer> l =
      BuildLayer(R"({"type": "multi_head_attention", "num_heads": 3,
                     "key_dim": 2, "use_bias": false})",
                 {{3, 4}});
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->params().size(), 4u);
  EXPECT_EQ(l->params()[0]->value.shape(), (Shape{4, 6}));
  EXPECT_EQ(l->params()[3]->value.shape(), (Shape{6, 4}));
  Randomize(*l, 41);
  GradCheck(*l, 2, PassContext());
}

TEST(TransformerLayersTest, AttentionNamesAndErrors) {
  std::unique_ptr<Layer> torch = BuildLayer(
      R"({"type": "multi_head_attention", "name": "bert.encoder.layer.0.attention",
          "num_heads": 2})",
      {{4, 6}, {4}}, ParamNaming::kTorch);
  ASSERT_NE(torch, nullptr);
  const std::string p = "bert.encoder.layer.0.attention.";
  EXPECT_EQ(Names(*torch),
            (std::vector<std::string>{
                p + "self.query.weight", p + "self.query.bias",
                p + "self.key.weight", p + "self.key.bias",
                p + "self.value.weight", p + "self.value.bias",
                p + "output.dense.weight", p + "output.dense.bias"}));
  // PyTorch's Linear layout: [out, in].
  EXPECT_EQ(torch->params()[0]->value.shape(), (Shape{6, 6}));
  std::unique_ptr<Layer> keras = BuildLayer(
      R"({"type": "multi_head_attention", "name": "mha", "num_heads": 2})",
      {{4, 6}});
  EXPECT_EQ(Names(*keras)[6], "mha/attention_output/kernel");
  EXPECT_EQ(BuildError(R"({"type": "multi_head_attention", "num_heads": 4})",
                       {{4, 6}}),
            "layer (l): the width 6 is not a multiple of num_heads 4; give "
            "key_dim");
  EXPECT_EQ(BuildError(R"({"type": "multi_head_attention", "num_heads": 2})",
                       {{4, 6}, {5}}),
            "layer (l): the padding mask in1 must be [4] (one per position), "
            "got [5]");
  EXPECT_EQ(BuildError(R"({"type": "multi_head_attention", "num_heads": 2})",
                       {{24}}),
            "layer (l): expects a sequence [length, width], got [24]");
}

}  // namespace
}  // namespace lockstep
