// Building a Model: errors that name the layer, frozen layers (inference
// only, no backward), Keras and Hugging Face parameter names, shapes and
// counts, and the deterministic Glorot initialisation.
#include "core/model/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/job/job_spec.h"
#include "core/model/model_test_util.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using testing::BuildOrDie;
using testing::Conv;
using testing::Dense;
using testing::Dropout;
using testing::Of;
using testing::RandomInput;
using testing::Spec;
using testing::Stack;
using testing::TinyBert;
using testing::Xent;

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
            "implemented for max_pool2d; use \"valid\" or cells on each side "
            "(N or [H, W])");
  spec =
      Stack({4, 4, 2},
            {Spec(R"({"type": "max_pool2d", "pool_size": 3, "padding": 2})")});
  EXPECT_EQ(error(spec),
            "model.layers[0] (max_pooling2d): padding [2, 2] is more than "
            "half of pool_size [3, 3] (a window would hold only padding)");
  // PyTorch's MaxPool2d(3, 2, padding=1): 4 -> (4 + 2 - 3) / 2 + 1 = 2.
  spec = Stack({4, 4, 2}, {Spec(R"({"type": "max_pool2d", "pool_size": 3,
                                    "strides": 2, "padding": 1})")});
  absl::StatusOr<std::unique_ptr<Model>> padded = Model::Build(spec, 1);
  ASSERT_TRUE(padded.ok()) << padded.status();
  EXPECT_EQ((*padded)->output_shape(), (Shape{2, 2, 2}));

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
  const BatchLoss eval = m->Evaluate(x, y.data(), Xent());
  const BatchLoss train = m->TrainStep(x, y.data(), Xent(), 1.0f / 5, 9);
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

}  // namespace
}  // namespace lockstep
