// End-to-end checks of Model: gradients against finite differences of the
// step's own loss, build errors, initialisation, empty slices, learning.
#include "core/model/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/job/job_spec.h"
#include "core/layers/registry.h"
#include "gtest/gtest.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

constexpr LossType kXent = LossType::kSparseCategoricalCrossentropy;

LayerSpec Spec(const std::string& json) {
  absl::StatusOr<LayerSpec> l = LayerFromJson(json);
  EXPECT_TRUE(l.ok()) << l.status();
  return l.ok() ? *l : LayerSpec();
}

LayerSpec Dense(int64_t units, const char* act = "linear") {
  return Spec(absl::StrFormat(
      R"({"type": "dense", "units": %d, "activation": "%s"})", units, act));
}

LayerSpec Conv(int64_t filters, int64_t k, int64_t stride, const char* pad,
               const char* act) {
  return Spec(absl::StrFormat(
      R"({"type": "conv2d", "filters": %d, "kernel_size": %d, "strides": %d,
          "padding": "%s", "activation": "%s"})",
      filters, k, stride, pad, act));
}

LayerSpec Of(const char* type) {
  return Spec(absl::StrFormat(R"({"type": "%s"})", type));
}

LayerSpec Dropout(double rate) {
  return Spec(absl::StrFormat(R"({"type": "dropout", "rate": %g})", rate));
}

ModelSpec Stack(const Shape& input, std::vector<LayerSpec> layers) {
  ModelSpec spec;
  spec.inputs = {{"input", input}};
  spec.layers = std::move(layers);
  return spec;
}

std::unique_ptr<Model> BuildOrDie(const ModelSpec& spec, uint64_t seed = 1) {
  absl::StatusOr<std::unique_ptr<Model>> m = Model::Build(spec, seed);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

Tensor RandomInput(const Model& m, int64_t n, uint32_t seed) {
  Shape shape = m.input_shape();
  shape.insert(shape.begin(), n);
  Tensor x(shape);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  for (float& v : x.values()) v = d(gen);
  return x;
}

std::vector<int32_t> Labels(int64_t n, int classes) {
  std::vector<int32_t> l(n);
  for (int64_t i = 0; i < n; ++i)
    l[i] = static_cast<int32_t>((i * 3 + 1) % classes);
  return l;
}

// Checks every parameter's gradient from TrainStep against central
// differences of grad_scale * loss_sum (TrainStep's own loss, so dropout
// uses the same mask).
void CheckGradients(Model& m, const Tensor& x, const std::vector<int32_t>& y,
                    LossType loss, uint64_t dropout_seed = 5, float eps = 2e-3f,
                    double tol = 3e-3) {
  const float scale = 0.5f;
  m.TrainStep(x, y.data(), loss, scale, dropout_seed);
  std::vector<std::vector<float>> grads;
  for (Param* p : m.params()) grads.push_back(p->grad.values());
  int checked = 0, kinks = 0;
  for (size_t k = 0; k < m.params().size(); ++k) {
    Param* p = m.params()[k];
    for (int64_t i = 0; i < p->value.size(); ++i) {
      float* v = p->value.data() + i;
      const float saved = *v;
      *v = saved + eps;
      const double up =
          scale * m.TrainStep(x, y.data(), loss, scale, dropout_seed).loss_sum;
      *v = saved - eps;
      const double down =
          scale * m.TrainStep(x, y.data(), loss, scale, dropout_seed).loss_sum;
      *v = saved;
      const double mid =
          scale * m.TrainStep(x, y.data(), loss, scale, dropout_seed).loss_sum;
      const double numeric = (up - down) / (2 * eps);
      // A relu or max-pool kink inside [-eps, eps] makes the one-sided
      // slopes disagree: the difference quotient means nothing there.
      const double slope_up = (up - mid) / eps, slope_down = (mid - down) / eps;
      if (std::fabs(slope_up - slope_down) > tol * (1 + std::fabs(numeric))) {
        ++kinks;
        continue;
      }
      ASSERT_NEAR(grads[k][i], numeric, tol * (1 + std::fabs(numeric)))
          << p->name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
  EXPECT_LE(kinks, checked / 50 + 1);
}

TEST(ModelTest, DenseTanhGradients) {
  ModelSpec spec;
  spec.inputs = {{"input", {6}}};
  spec.layers = {Dense(8, "tanh"), Dense(4)};
  auto m = BuildOrDie(spec);
  CheckGradients(*m, RandomInput(*m, 5, 1), Labels(5, 4), kXent);
}

TEST(ModelTest, ConvPoolFlattenDenseSoftmaxGradients) {
  for (int threads : {1, 2}) {
    SetNumThreads(threads);
    ModelSpec spec;
    spec.inputs = {{"input", {9, 8, 2}}};
    LayerSpec pool = Of("max_pool2d");
    spec.layers = {Conv(3, 3, 2, "same", "tanh"),     // 5x4x3
                   Conv(4, 2, 1, "valid", "linear"),  // 4x3x4
                   pool,                              // 2x1x4
                   Of("flatten"), Dense(3, "softmax")};
    auto m = BuildOrDie(spec);
    EXPECT_EQ(m->output_shape(), (Shape{3}));
    // Small steps: max-pool near-ties would otherwise flip within +-eps.
    CheckGradients(*m, RandomInput(*m, 3, 2), Labels(3, 3), kXent, 5,
                   /*eps=*/5e-4f);
  }
}

TEST(ModelTest, SoftmaxWithMseGradients) {
  ModelSpec spec;
  spec.inputs = {{"input", {4}}};
  spec.layers = {Dense(5, "sigmoid"), Dense(3, "softmax")};
  auto m = BuildOrDie(spec);
  CheckGradients(*m, RandomInput(*m, 4, 3), Labels(4, 3), LossType::kMse);
}

TEST(ModelTest, MseOnASingleUnitGradients) {
  ModelSpec spec;
  spec.inputs = {{"input", {3}}};
  spec.layers = {Dense(4, "relu"), Dense(1)};
  auto m = BuildOrDie(spec);
  CheckGradients(*m, RandomInput(*m, 6, 4), Labels(6, 2), LossType::kMse);
}

TEST(ModelTest, DropoutGradientsWithAFixedSeed) {
  ModelSpec spec;
  spec.inputs = {{"input", {5}}};
  spec.layers = {Dense(10, "tanh"), Dropout(0.5), Dense(3)};
  auto m = BuildOrDie(spec);
  Tensor x = RandomInput(*m, 4, 5);
  std::vector<int32_t> y = Labels(4, 3);
  CheckGradients(*m, x, y, kXent, /*dropout_seed=*/77);
  // The mask is a pure function of the seed: same seed, same loss; a new
  // seed, a new mask; inference uses no dropout.
  const double a = m->TrainStep(x, y.data(), kXent, 1, 77).loss_sum;
  const double b = m->TrainStep(x, y.data(), kXent, 1, 77).loss_sum;
  const double c = m->TrainStep(x, y.data(), kXent, 1, 78).loss_sum;
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  const double e1 = m->Evaluate(x, y.data(), kXent).loss_sum;
  EXPECT_NE(e1, a);
}

TEST(ModelTest, FusedSoftmaxLossMatchesExplicitCrossEntropy) {
  ModelSpec spec;
  spec.inputs = {{"input", {4}}};
  spec.layers = {Dense(3, "softmax")};
  auto m = BuildOrDie(spec);
  Tensor x = RandomInput(*m, 2, 6);
  std::vector<int32_t> y = Labels(2, 3);
  BatchLoss got = m->Evaluate(x, y.data(), kXent);
  const float* k = m->params()[0]->value.data();
  double want = 0;
  for (int r = 0; r < 2; ++r) {
    double z[3], s = 0;
    for (int j = 0; j < 3; ++j) {
      z[j] = 0;
      for (int i = 0; i < 4; ++i) z[j] += x.data()[r * 4 + i] * k[i * 3 + j];
      s += std::exp(z[j]);
    }
    want += -std::log(std::exp(z[y[r]]) / s);
  }
  EXPECT_NEAR(got.loss_sum, want, 1e-5);
  EXPECT_EQ(got.count, 2);
}

TEST(ModelTest, BuildErrorsNameTheLayer) {
  auto error = [](const ModelSpec& spec) {
    absl::StatusOr<std::unique_ptr<Model>> m = Model::Build(spec, 1);
    EXPECT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(m.status().message());
  };
  ModelSpec spec = Stack({784}, {Conv(8, 3, 1, "valid", "relu")});
  EXPECT_EQ(error(spec),
            "model.layers[0] (conv2d): expects an image input [height, width, "
            "channels], got [784]; set model.input_shape to [height, width, "
            "channels]");

  spec = Stack({4, 4, 1}, {Conv(8, 3, 1, "valid", "relu"),
                           Conv(8, 3, 1, "valid", "relu")});
  EXPECT_EQ(error(spec),
            "model.layers[1] (conv2d_1): kernel_size [3, 3] is larger than "
            "its input [2, 2, 8] with padding \"valid\"; use padding "
            "\"same\" or a smaller kernel");
  spec.layers[1] = Conv(8, 3, 1, "same", "relu");
  EXPECT_TRUE(Model::Build(spec, 1).ok());

  spec = Stack({10}, {Dense(5), Of("flatten"), Dense(3),
                      Conv(2, 1, 1, "same", "linear")});
  EXPECT_EQ(error(spec),
            "model.layers[3] (conv2d): expects an image input [height, width, "
            "channels], got [3]; image layers must come before flatten and "
            "dense");

  spec = Stack({3, 3, 2},
               {Spec(R"({"type": "max_pool2d", "pool_size": [4, 2]})")});
  EXPECT_EQ(error(spec),
            "model.layers[0] (max_pooling2d): pool_size [4, 2] is larger than "
            "its input [3, 3, 2]");
  spec =
      Stack({4, 4, 2}, {Spec(R"({"type": "max_pool2d", "padding": "same"})")});
  EXPECT_EQ(error(spec),
            "model.layers[0] (max_pooling2d): padding \"same\" is not "
            "implemented for max_pool2d; use \"valid\"");

  spec = Stack({10}, {Dense(3), Dense(3)});
  spec.layers[0].name = "dense";
  spec.layers[1].name = "dense";
  EXPECT_EQ(error(spec),
            "model.layers[1] (dense): the name \"dense\" is already used by "
            "an earlier layer; layer names must be unique");
  spec = Stack({10}, {Dense(3), Dense(3)});
  spec.layers[1].inputs = {"dense", "nothing"};
  EXPECT_EQ(error(spec),
            "model.layers[1] (dense_1): input \"nothing\" is neither a model "
            "input (input) nor an earlier layer");

  spec = Stack({10}, {});
  EXPECT_EQ(error(spec), "model.layers: must not be empty");
  spec = Stack({}, {Dense(3)});
  EXPECT_EQ(error(spec),
            "model.input_shape: every dimension must be > 0, got []");
}

// trainable: false. The frozen base runs as in inference (dropout off, batch
// norm on its running statistics) even in a training step, gets no backward
// at all below the first trainable layer, and its params are kFrozen.
TEST(ModelTest, FrozenLayersRunAsInferenceWithNoBackward) {
  LayerSpec conv = Conv(4, 3, 1, "same", "relu");
  LayerSpec bn = Spec(R"({"type": "batch_norm", "activation": "relu6"})");
  LayerSpec drop = Dropout(0.5);
  for (LayerSpec* l : {&conv, &bn, &drop}) l->trainable = false;
  ModelSpec spec =
      Stack({6, 6, 2}, {conv, bn, drop, Of("flatten"), Dense(3)});
  std::unique_ptr<Model> m = BuildOrDie(spec);
  ASSERT_NE(m, nullptr);
  const std::vector<Param*>& p = m->params();
  ASSERT_EQ(p.size(), 8u);  // conv 2, batch norm 4, dense 2
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(p[i]->update, ParamUpdate::kFrozen) << p[i]->name;
  }
  EXPECT_EQ(p[6]->update, ParamUpdate::kOptimizer);
  // Only the dense layer has a backward step.
  ASSERT_EQ(m->graph().backward_plan().size(), 1u);
  EXPECT_EQ(m->graph().node(m->graph().backward_plan()[0].node).name,
            "dense");
  p[4]->value.values() = {0.5f, -0.5f, 0.25f, 0.0f};  // running mean
  const Tensor x = RandomInput(*m, 5, 3);
  std::vector<int32_t> y = {0, 1, 2, 0, 1};
  // The training step's output is the inference output (no dropout, the
  // running statistics), so its loss is Evaluate's.
  const BatchLoss eval = m->Evaluate(x, y.data(), kXent);
  const BatchLoss train = m->TrainStep(x, y.data(), kXent, 1.0f / 5, 9);
  EXPECT_DOUBLE_EQ(train.loss_sum, eval.loss_sum);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(p[i]->grad.values(), std::vector<float>(p[i]->grad.size(), 0))
        << p[i]->name;
  }
  float largest = 0;
  for (float g : p[6]->grad.values()) largest = std::max(largest, std::abs(g));
  EXPECT_GT(largest, 0.0f);
  // A tie across the frozen line is refused.
  LayerSpec emb = Spec(R"({"type": "embedding", "name": "emb",
                           "input_dim": 10, "output_dim": 4})");
  LayerSpec out = Spec(R"({"type": "dense", "units": 10,
                           "tied_to": "emb"})");
  out.trainable = false;
  absl::StatusOr<std::unique_ptr<Model>> tied =
      Model::Build(Stack({3}, {emb, out}), 1);
  ASSERT_FALSE(tied.ok());
  EXPECT_EQ(tied.status().message(),
            "model.layers[1] (dense): shares \"emb/embeddings\" with a layer "
            "whose trainable differs; tied layers must both be trainable or "
            "both frozen");
}

TEST(ModelTest, DenseOnPositionsAppliesToTheLastAxis) {
  // [4, 3] -> [4, 2]: the same weights at every position, as Keras.
  auto m =
      BuildOrDie(Stack({4, 3}, {Dense(2, "tanh"), Of("flatten"), Dense(3)}));
  EXPECT_EQ(m->params()[0]->value.shape(), (Shape{3, 2}));
  EXPECT_EQ(m->output_shape(), (Shape{3}));
  CheckGradients(*m, RandomInput(*m, 3, 9), Labels(3, 3), kXent);
}

TEST(ModelTest, KerasNamesShapesAndCounts) {
  ModelSpec spec;
  spec.inputs = {{"input", {28, 28, 1}}};
  spec.layers = {Conv(32, 3, 1, "valid", "relu"),
                 Of("max_pool2d"),
                 Conv(64, 3, 1, "valid", "relu"),
                 Of("max_pool2d"),
                 Of("flatten"),
                 Dropout(0.5),
                 Dense(10, "softmax")};
  auto m = BuildOrDie(spec);
  std::vector<std::string> names;
  for (Param* p : m->params()) names.push_back(p->name);
  EXPECT_EQ(names, (std::vector<std::string>{"conv2d/kernel", "conv2d/bias",
                                             "conv2d_1/kernel", "conv2d_1/bias",
                                             "dense/kernel", "dense/bias"}));
  EXPECT_EQ(m->params()[2]->value.shape(), (Shape{3, 3, 32, 64}));
  EXPECT_EQ(m->params()[4]->value.shape(), (Shape{1600, 10}));
  // Keras' model.summary() for this model: 34,826 parameters.
  EXPECT_EQ(m->num_parameters(), 34826);
  EXPECT_EQ(m->output_shape(), (Shape{10}));
  EXPECT_EQ(m->graph().node(4).name, "max_pooling2d_1");
}

TEST(ModelTest, InitIsGlorotAndDeterministic) {
  ModelSpec spec;
  spec.inputs = {{"input", {8, 8, 3}}};
  spec.layers = {Conv(16, 3, 1, "same", "relu"), Of("flatten"), Dense(20)};
  auto a = BuildOrDie(spec, 42), b = BuildOrDie(spec, 42),
       c = BuildOrDie(spec, 43);
  for (size_t i = 0; i < a->params().size(); ++i) {
    const Tensor& va = a->params()[i]->value;
    EXPECT_EQ(std::memcmp(va.data(), b->params()[i]->value.data(),
                          va.size() * sizeof(float)),
              0);
  }
  EXPECT_NE(a->params()[0]->value.values(), c->params()[0]->value.values());
  EXPECT_NE(a->params()[2]->value.values(), c->params()[2]->value.values());
  const double conv_limit = std::sqrt(6.0 / (9 * 3 + 9 * 16));
  const double dense_limit = std::sqrt(6.0 / (1024 + 20));
  for (float v : a->params()[0]->value.values())
    ASSERT_LE(std::fabs(v), conv_limit);
  for (float v : a->params()[2]->value.values())
    ASSERT_LE(std::fabs(v), dense_limit);
  for (float v : a->params()[1]->value.values()) ASSERT_EQ(v, 0.0f);
  for (float v : a->params()[3]->value.values()) ASSERT_EQ(v, 0.0f);
}

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
  BatchLoss r = m->TrainStep(x, nullptr, kXent, 1.0f, 1);
  EXPECT_EQ(r.count, 0);
  EXPECT_EQ(r.loss_sum, 0);
  EXPECT_EQ(r.correct, 0);
  for (Param* p : m->params()) {
    for (float g : p->grad.values()) ASSERT_EQ(g, 0.0f);
  }
  EXPECT_EQ(ready, (std::vector<int>{2, 3, 0, 1}));
  EXPECT_EQ(m->Evaluate(x, nullptr, kXent).count, 0);
  EXPECT_EQ(m->Evaluate(Tensor(), nullptr, kXent).count, 0);
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
  BatchLoss r1 = m->TrainStep(x, y.data(), kXent, 1.0f, 1);
  EXPECT_EQ(ready, (std::vector<int>{2, 3, 0, 1}));
  std::vector<float> g1 = m->params()[0]->grad.values();
  m->TrainStep(x, y.data(), kXent, 1.0f, 1);
  EXPECT_EQ(m->params()[0]->grad.values(), g1);  // not accumulated
  m->TrainStep(x, y.data(), kXent, 0.25f, 1);
  for (size_t i = 0; i < g1.size(); ++i) {
    EXPECT_NEAR(m->params()[0]->grad.values()[i], 0.25f * g1[i], 1e-7);
  }
  // Evaluate: same loss without dropout, grads untouched.
  std::vector<float> before = m->params()[0]->grad.values();
  BatchLoss e = m->Evaluate(x, y.data(), kXent);
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
  m->TrainStep(big, y.data(), kXent, 1.0f, 1);
  BatchLoss a = m->TrainStep(small, y.data(), kXent, 1.0f, 1);
  std::vector<float> ga = m->params()[0]->grad.values();
  auto fresh = BuildOrDie(spec);
  BatchLoss b = fresh->TrainStep(small, y.data(), kXent, 1.0f, 1);
  EXPECT_EQ(a.loss_sum, b.loss_sum);
  EXPECT_EQ(ga, fresh->params()[0]->grad.values());
}

// A BERT-tiny-shaped model through the whole graph: the bert_mlm block's
// layers, residual adds, the padding mask and the tied output projection.
ModelSpec TinyBert(int64_t layers, double dropout) {
  absl::StatusOr<ModelSpec> m = ParseModelSpec(absl::StrFormat(R"({
      "inputs": [{"name": "token_ids", "shape": [6]},
                 {"name": "segment_ids", "shape": [6]},
                 {"name": "padding_mask", "shape": [6]},
                 {"name": "mask_positions", "shape": [2]}],
      "layers": [{"type": "bert_mlm", "name": "bert",
                  "inputs": ["token_ids", "segment_ids", "padding_mask",
                             "mask_positions"],
                  "vocab_size": 11, "hidden": 8, "layers": %d, "heads": 2,
                  "intermediate": 12, "max_positions": 8, "dropout": %g}],
      "param_names": "torch"})",
                                                           layers, dropout));
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : ModelSpec();
}

// Two samples: [CLS] a b [MASK] [SEP] pad, and a full one; the second
// sample's second prediction slot is unused (label -1, position -1).
Tensor TinyBertBatch() {
  const float rows[2][20] = {
      {2, 5, 6, 4, 3, 0, /**/ 0, 0, 0, 0, 0, 0, /**/ 1, 1, 1, 1, 1, 0,
       /**/ 3, 1},
      {2, 7, 4, 8, 9, 3, /**/ 0, 0, 0, 1, 1, 1, /**/ 1, 1, 1, 1, 1, 1,
       /**/ 2, -1}};
  Tensor x({2, 20});
  std::memcpy(x.data(), rows, sizeof(rows));
  return x;
}

TEST(ModelTest, BertMlmGradientsThroughTheWholeGraph) {
  for (int64_t layers : {1, 2}) {
    auto m = BuildOrDie(TinyBert(layers, 0.1));
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->labels_per_sample(), 2);
    EXPECT_EQ(m->classes(), 11);
    // BERT's 0.02-stddev start makes every LayerNorm input tiny, so the
    // loss curves sharply within a finite-difference step: check at
    // weights of a trained model's scale instead.
    std::mt19937 gen(3);
    std::uniform_real_distribution<float> d(-0.4f, 0.4f);
    for (Param* p : m->params()) {
      for (float& v : p->value.values()) v = d(gen);
    }
    const std::vector<int32_t> labels = {6, 5, 10, -1};
    CheckGradients(*m, TinyBertBatch(), labels, kXent, /*dropout_seed=*/9,
                   /*eps=*/1e-3f);
    // The unused slot counts for nothing: 3 labels.
    EXPECT_EQ(m->Evaluate(TinyBertBatch(), labels.data(), kXent).count, 3);
  }
}

TEST(ModelTest, BertMlmHasHuggingFaceNamesAndCounts) {
  auto m = BuildOrDie(TinyBert(2, 0.1));
  ASSERT_NE(m, nullptr);
  std::vector<std::string> names;
  for (Param* p : m->params()) names.push_back(p->name);
  auto has = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  for (const char* n :
       {"bert.embeddings.word_embeddings.weight",
        "bert.embeddings.position_embeddings.weight",
        "bert.embeddings.token_type_embeddings.weight",
        "bert.embeddings.LayerNorm.weight", "bert.embeddings.LayerNorm.bias",
        "bert.encoder.layer.0.attention.self.query.weight",
        "bert.encoder.layer.1.attention.output.dense.bias",
        "bert.encoder.layer.1.attention.output.LayerNorm.weight",
        "bert.encoder.layer.0.intermediate.dense.weight",
        "bert.encoder.layer.1.output.dense.weight",
        "bert.encoder.layer.1.output.LayerNorm.bias",
        "cls.predictions.transform.dense.weight",
        "cls.predictions.transform.LayerNorm.weight", "cls.predictions.bias"}) {
    EXPECT_TRUE(has(n)) << n;
  }
  // The decoder's weight is the word embedding itself: no copy of it.
  EXPECT_FALSE(has("cls.predictions.weight"));
  EXPECT_EQ(names.front(), "bert.embeddings.word_embeddings.weight");
  // BertForMaskedLM's count for these sizes (h 8, i 12, v 11, p 8, t 2):
  // embeddings v*h + p*h + t*h + 2h; per layer 4(h*h + h) + 2h + (h*i + i) +
  // (i*h + h) + 2h; head h*h + h + 2h + v.
  const int64_t h = 8, i = 12, v = 11;
  const int64_t per_layer = 4 * (h * h + h) + 2 * h + (h * i + i) +
                            (i * h + h) + 2 * h;
  EXPECT_EQ(m->num_parameters(), v * h + 8 * h + 2 * h + 2 * h +
                                     2 * per_layer + (h * h + h) + 2 * h + v);
  // Torch layout for the query: [out, in].
  for (Param* p : m->params()) {
    if (p->name == "bert.encoder.layer.0.attention.self.query.weight") {
      EXPECT_EQ(p->value.shape(), (Shape{8, 8}));
    }
    if (p->name == "bert.encoder.layer.0.intermediate.dense.weight") {
      EXPECT_EQ(p->value.shape(), (Shape{12, 8}));
    }
  }
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
  const double first = m->Evaluate(x, y.data(), kXent).loss_sum / n;
  for (int step = 0; step < 300; ++step) {
    m->TrainStep(x, y.data(), kXent, 1.0f / n, step);
    for (Param* p : m->params()) {
      for (int64_t i = 0; i < p->value.size(); ++i) {
        p->value.data()[i] -= 0.1f * p->grad.data()[i];
      }
    }
  }
  BatchLoss last = m->Evaluate(x, y.data(), kXent);
  EXPECT_LT(last.loss_sum / n, 0.1 * first);
  EXPECT_GE(last.correct, n - 2);
}

}  // namespace
}  // namespace lockstep
