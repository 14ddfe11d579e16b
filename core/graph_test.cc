// Graph::Build: names and inputs resolved (default: the layer before),
// shapes inferred, parameters gathered once, errors naming the layer, and
// the backward plan (which layers run, where their input gradients go).
#include "core/graph.h"

#include <memory>
#include <string>

#include "core/job_spec.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

ModelSpec Model(const std::string& json) {
  absl::StatusOr<ModelSpec> m = ParseModelSpec(json);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : ModelSpec();
}

std::unique_ptr<Graph> Build(const std::string& json) {
  absl::StatusOr<std::unique_ptr<Graph>> g = Graph::Build(Model(json), 1);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? std::move(*g) : nullptr;
}

TEST(GraphTest, AStackChainsItsLayers) {
  std::unique_ptr<Graph> g = Build(R"({"input_shape": [4, 4, 1], "layers": [
      {"type": "flatten"}, {"type": "dense", "units": 3},
      {"type": "dropout", "rate": 0.5}, {"type": "dense", "units": 2}]})");
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(g->nodes().size(), 5u);
  EXPECT_EQ(g->num_inputs(), 1);
  EXPECT_EQ(g->node(0).name, "input");
  EXPECT_EQ(g->node(1).name, "flatten");
  EXPECT_EQ(g->node(2).inputs, std::vector<int>{1});
  EXPECT_EQ(g->node(4).name, "dense_1");
  EXPECT_EQ(g->node(4).shape, Shape{2});
  EXPECT_EQ(g->node(3).layer_index, 2);
  EXPECT_EQ(g->params().size(), 4u);
  EXPECT_EQ(g->num_parameters(), 16 * 3 + 3 + 3 * 2 + 2);
  // Backward: dense_1, dropout, dense (which needs no input gradient:
  // nothing below it learns). Flatten shares the input's slot.
  ASSERT_EQ(g->backward_plan().size(), 3u);
  EXPECT_EQ(g->backward_plan()[0].node, 4);
  EXPECT_EQ(g->backward_plan()[0].ready_params, (std::vector<int>{2, 3}));
  EXPECT_EQ(g->backward_plan()[1].node, 3);
  EXPECT_EQ(g->backward_plan()[2].node, 2);
  EXPECT_EQ(g->backward_plan()[2].dx_slot, std::vector<int>{-1});
  EXPECT_EQ(g->backward_plan()[2].ready_params, (std::vector<int>{0, 1}));
  EXPECT_EQ(g->grad_slot(1), g->grad_slot(0));
  EXPECT_TRUE(g->untouched_params().empty());
}

TEST(GraphTest, NamedInputsAndADeadBranch) {
  // "side" does not reach the output: it never runs backward and its
  // parameters' gradients stay zero (final before backward).
  std::unique_ptr<Graph> g = Build(R"({
      "inputs": [{"name": "a", "shape": [3]}, {"name": "b", "shape": [5]}],
      "layers": [
        {"type": "dense", "name": "side", "units": 2, "inputs": ["a"]},
        {"type": "dense", "name": "main", "units": 4, "inputs": "b"},
        {"type": "dense", "name": "out", "units": 2}]})");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->input_floats(), 8);
  EXPECT_EQ(g->input_offset(1), 3);
  EXPECT_EQ(g->node(3).inputs, std::vector<int>{1});
  EXPECT_EQ(g->node(4).inputs, std::vector<int>{3});
  EXPECT_EQ(g->untouched_params(), (std::vector<int>{0, 1}));
  ASSERT_EQ(g->backward_plan().size(), 2u);
  EXPECT_EQ(g->backward_plan()[1].node, 3);
}

TEST(GraphTest, ErrorsNameTheLayer) {
  auto error = [](const std::string& json) {
    absl::StatusOr<std::unique_ptr<Graph>> g = Graph::Build(Model(json), 1);
    EXPECT_FALSE(g.ok());
    return std::string(g.status().message());
  };
  EXPECT_EQ(error(R"({"input_shape": [3], "layers": [
      {"type": "dense", "units": 2, "inputs": ["dense_7"]}]})"),
            "model.layers[0] (dense): input \"dense_7\" is neither a model "
            "input (input) nor an earlier layer");
  EXPECT_EQ(error(R"({"input_shape": [3], "layers": [
      {"type": "dense", "units": 2, "name": "input"}]})"),
            "model.layers[0] (input): the name \"input\" is already used by "
            "an earlier layer; layer names must be unique");
}

}  // namespace
}  // namespace lockstep
