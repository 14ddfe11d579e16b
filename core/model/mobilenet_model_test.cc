// The inverted_residual and mobilenet_v2 blocks without torch: their
// expansion (layers, shapes, residual adds, names in both namings) and
// torchvision's parameter counts. The numbers against torchvision itself
// are in tests/mobilenet_torch_test.
#include "core/layers/mobilenet.h"

#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "core/job/job_spec.h"
#include "core/model/model.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

std::unique_ptr<Model> Build(const std::string& model_json) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(model_json);
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (!spec.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<Model>> m = Model::Build(*spec, 1);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

std::string BuildError(const std::string& model_json) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(model_json);
  if (!spec.ok()) return std::string(spec.status().message());
  absl::StatusOr<std::unique_ptr<Model>> m = Model::Build(*spec, 1);
  return m.ok() ? "" : std::string(m.status().message());
}

TEST(MobileNetTest, MakeDivisibleIsTorchvisions) {
  EXPECT_EQ(MakeDivisible(32 * 1.0), 32);
  EXPECT_EQ(MakeDivisible(32 * 0.35), 16);  // 11.2 -> 8 < 90%: 16
  EXPECT_EQ(MakeDivisible(16 * 0.35), 8);
  EXPECT_EQ(MakeDivisible(24 * 0.35), 8);
  EXPECT_EQ(MakeDivisible(96 * 0.35), 32);  // 33.6 -> 32
  EXPECT_EQ(MakeDivisible(320 * 0.35), 112);
  EXPECT_EQ(MakeDivisible(1280 * 1.4), 1792);
}

// torchvision.models.mobilenet_v2(width_mult=a): its parameters (158
// tensors) and its running statistics (num_batches_tracked aside).
TEST(MobileNetTest, ParameterCountsAreTorchvisions) {
  struct Want {
    double alpha;
    int64_t params, stats;
  };
  for (const Want& w : {Want{1.0, 3504872, 34112}, Want{0.35, 1677128, 14080},
                        Want{1.4, 6108776, 47936}}) {
    std::unique_ptr<Model> m = Build(absl::StrFormat(
        R"({"input_shape": [224, 224, 3], "param_names": "torch",
            "layers": [{"type": "mobilenet_v2", "alpha": %g}]})",
        w.alpha));
    ASSERT_NE(m, nullptr);
    int64_t params = 0, stats = 0, tensors = 0;
    for (const Param* p : m->params()) {
      if (p->update == ParamUpdate::kOptimizer) {
        params += p->value.size();
        ++tensors;
      } else {
        stats += p->value.size();
      }
    }
    EXPECT_EQ(params, w.params) << w.alpha;
    EXPECT_EQ(stats, w.stats) << w.alpha;
    EXPECT_EQ(tensors, 158) << w.alpha;
    EXPECT_EQ(m->output_shape(), Shape{1000});
  }
}

TEST(MobileNetTest, NamesShapesAndTheBaseWithoutTop) {
  std::unique_ptr<Model> m = Build(
      R"({"input_shape": [96, 96, 3], "param_names": "torch",
          "layers": [{"type": "mobilenet_v2", "alpha": 0.35,
                      "include_top": false}]})");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->output_shape(), (Shape{3, 3, 1280}));
  std::map<std::string, Shape> shapes;
  for (const Param* p : m->params()) shapes[p->name] = p->value.shape();
  EXPECT_EQ(shapes.at("features.0.0.weight"), (Shape{16, 3, 3, 3}));
  EXPECT_EQ(shapes.at("features.0.1.running_var"), (Shape{16}));
  // features.1: no expansion, so the depthwise is conv.0.
  EXPECT_EQ(shapes.at("features.1.conv.0.0.weight"), (Shape{16, 1, 3, 3}));
  EXPECT_EQ(shapes.at("features.1.conv.1.weight"), (Shape{8, 16, 1, 1}));
  EXPECT_EQ(shapes.at("features.1.conv.2.running_mean"), (Shape{8}));
  EXPECT_EQ(shapes.at("features.2.conv.0.0.weight"), (Shape{48, 8, 1, 1}));
  EXPECT_EQ(shapes.at("features.2.conv.1.0.weight"), (Shape{48, 1, 3, 3}));
  EXPECT_EQ(shapes.at("features.2.conv.3.bias"), (Shape{8}));
  EXPECT_EQ(shapes.at("features.18.0.weight"), (Shape{1280, 112, 1, 1}));
  EXPECT_EQ(shapes.count("classifier.1.weight"), 0u);
  // Residual adds where the stride is 1 and the channels agree: features.3
  // (24 -> 24 at alpha 1; 8 -> 8 here) has one, features.2 (stride 2) none.
  int adds = 0;
  bool add3 = false, add2 = false;
  for (const GraphNode& node : m->graph().nodes()) {
    if (node.layer == nullptr || node.layer->type() != "add") continue;
    ++adds;
    add3 |= node.layer->name() == "features.3.add";
    add2 |= node.layer->name() == "features.2.add";
  }
  EXPECT_EQ(adds, 10);  // torchvision's use_res_connect blocks
  EXPECT_TRUE(add3);
  EXPECT_FALSE(add2);

  // Keras naming: under the block's name, '_' for '.', Keras layouts.
  std::unique_ptr<Model> k = Build(
      R"({"input_shape": [32, 32, 3],
          "layers": [{"type": "mobilenet_v2", "name": "base",
                      "alpha": 0.35, "classes": 2}]})");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->params().front()->name, "base/features_0_0/kernel");
  EXPECT_EQ(k->params().front()->value.shape(), (Shape{3, 3, 3, 16}));
  EXPECT_EQ(k->params()[4]->name, "base/features_0_1/moving_variance");
  EXPECT_EQ(k->params().back()->name, "base/classifier_1/bias");
  EXPECT_EQ(k->output_shape(), Shape{2});
}

TEST(MobileNetTest, InvertedResidualBlock) {
  std::unique_ptr<Model> m = Build(
      R"({"input_shape": [8, 8, 4], "param_names": "torch",
          "layers": [{"type": "inverted_residual", "name": "ir",
                      "filters": 4, "expansion": 3},
                     {"type": "inverted_residual", "name": "down",
                      "filters": 6, "strides": 2, "expansion": 1}]})");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->output_shape(), (Shape{4, 4, 6}));
  std::vector<std::string> names;
  for (const Param* p : m->params()) {
    if (p->update == ParamUpdate::kOptimizer) names.push_back(p->name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       "ir.conv.0.0.weight", "ir.conv.0.1.weight",
                       "ir.conv.0.1.bias", "ir.conv.1.0.weight",
                       "ir.conv.1.1.weight", "ir.conv.1.1.bias",
                       "ir.conv.2.weight", "ir.conv.3.weight",
                       "ir.conv.3.bias", "down.conv.0.0.weight",
                       "down.conv.0.1.weight", "down.conv.0.1.bias",
                       "down.conv.1.weight", "down.conv.2.weight",
                       "down.conv.2.bias"}));
  int adds = 0;
  for (const GraphNode& node : m->graph().nodes()) {
    if (node.layer != nullptr && node.layer->type() == "add") ++adds;
  }
  EXPECT_EQ(adds, 1);  // the stride-1 block with equal channels only

  EXPECT_EQ(BuildError(R"({"input_shape": [64],
      "layers": [{"type": "inverted_residual", "filters": 4}]})"),
            "model.layers[0] (inverted_residual): expects an image input "
            "[height, width, channels], got [64]");
  EXPECT_EQ(BuildError(R"({"input_shape": [8, 8, 3],
      "layers": [{"type": "inverted_residual", "filters": 4,
                  "strides": 3}]})"),
            "model.layers[0].strides: must be an integer in [1, 2], got 3");
  EXPECT_EQ(BuildError(R"({"input_shape": [8, 8, 3],
      "layers": [{"type": "mobilenet_v2", "alpha": 0}]})"),
            "model.layers[0].alpha: must be > 0, got 0");
}

}  // namespace
}  // namespace lockstep
