// Graph::Build: names and inputs resolved (default: the layer before),
// shapes inferred, parameters gathered once, errors naming the layer, and
// the backward plan (which layers run, where their input gradients go).
#include "core/model/graph.h"

#include <cmath>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "core/checkpoint/safetensors.h"
#include "core/job/job_spec.h"
#include "gmock/gmock.h"
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

TEST(GraphTest, InitialWeightsFromSafetensors) {
  const std::string dir = ::testing::TempDir();
  auto model = [](const std::string& path) {
    return R"({"input_shape": [3], "layers": [
        {"type": "dense", "name": "a", "units": 2},
        {"type": "dense", "name": "b", "units": 4}],
        "param_names": "torch", "init": {"safetensors": ")" +
           path + "\"}}";
  };
  // The file: every parameter with known values, plus a buffer that is no
  // parameter.
  Tensor aw({2, 3}, {1, 2, 3, 4, 5, 6}), ab({2}, {7, 8}), bw({4, 2}), bb({4}),
      extra({5});
  const std::string good = dir + "/good.safetensors";
  ASSERT_TRUE(WriteSafetensors(good,
                               {{"a.weight", &aw},
                                {"a.bias", &ab},
                                {"b.weight", &bw},
                                {"b.bias", &bb},
                                {"b.extra_buffer", &extra}},
                               {})
                  .ok());
  std::unique_ptr<Graph> g = Build(model(good));
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->params()[0]->value.values(), aw.values());
  EXPECT_EQ(g->params()[1]->value.values(), ab.values());
  EXPECT_EQ(g->init_unused(), std::vector<std::string>{"b.extra_buffer"});

  auto error = [&](const std::string& path) {
    absl::StatusOr<std::unique_ptr<Graph>> g =
        Graph::Build(Model(model(path)), 1);
    EXPECT_FALSE(g.ok());
    return std::string(g.status().message());
  };
  const std::string missing = dir + "/missing.safetensors";
  ASSERT_TRUE(
      WriteSafetensors(
          missing, {{"a.weight", &aw}, {"a.bias", &ab}, {"b.weight", &bw}}, {})
          .ok());
  EXPECT_EQ(error(missing),
            "model.init.safetensors: \"" + missing +
                "\" has no tensor named \"b.bias\" (the model's parameter "
                "[4]); its tensors' names must be the model's parameter names "
                "(model.param_names), or set model.init.allow_missing to keep "
                "the initializers of those it lacks");
  // With allow_missing the lacking one keeps its initializer (zeros for a
  // bias) and is listed; a file with none of the parameters stays an error.
  auto lenient = [](const std::string& path) {
    return R"({"input_shape": [3], "layers": [
        {"type": "dense", "name": "a", "units": 2},
        {"type": "dense", "name": "b", "units": 4}],
        "param_names": "torch",
        "init": {"safetensors": ")" +
           path + R"(", "allow_missing": true}})";
  };
  std::unique_ptr<Graph> partial = Build(lenient(missing));
  ASSERT_NE(partial, nullptr);
  EXPECT_EQ(partial->params()[0]->value.values(), aw.values());
  EXPECT_EQ(partial->params()[3]->value.values(), std::vector<float>(4, 0));
  EXPECT_EQ(partial->init_missing(), std::vector<std::string>{"b.bias"});
  EXPECT_EQ(partial->InitSummary(missing),
            "initial weights: 3 of 4 parameter tensors from " + missing +
                "; initialized by their layers: b.bias");
  const std::string other = dir + "/other.safetensors";
  ASSERT_TRUE(WriteSafetensors(other, {{"c.weight", &aw}}, {}).ok());
  absl::StatusOr<std::unique_ptr<Graph>> none =
      Graph::Build(Model(lenient(other)), 1);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(),
            "model.init.safetensors: \"" + other +
                "\" has none of the model's 4 parameters (the first is "
                "\"a.weight\"); its tensors' names must be the model's "
                "parameter names (model.param_names)");
  const std::string shape = dir + "/shape.safetensors";
  Tensor wrong({3, 2});
  ASSERT_TRUE(WriteSafetensors(shape,
                               {{"a.weight", &wrong},
                                {"a.bias", &ab},
                                {"b.weight", &bw},
                                {"b.bias", &bb}},
                               {})
                  .ok());
  EXPECT_EQ(error(shape), "model.init.safetensors: \"" + shape +
                              "\" tensor \"a.weight\" is [3, 2] but the "
                              "model's parameter is [2, 3]");
  // A truncated file: the reader's error, under the field's name.
  const std::string truncated = dir + "/truncated.safetensors";
  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream(truncated, std::ios::binary)
      << bytes.substr(0, bytes.size() - 10);
  EXPECT_THAT(error(truncated),
              ::testing::StartsWith("model.init.safetensors: "));
  EXPECT_THAT(error(truncated), ::testing::HasSubstr("truncated"));
  // Bad input (exit 2), as a damaged data file, not DataLoss.
  EXPECT_EQ(Graph::Build(Model(model(truncated)), 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(error(dir + "/nope.safetensors"),
              ::testing::HasSubstr("nope.safetensors"));

  // The names under another prefix: said (it read as "no tensor named").
  const std::string prefixed = dir + "/prefixed.safetensors";
  ASSERT_TRUE(WriteSafetensors(prefixed,
                               {{"model.a.weight", &aw},
                                {"model.a.bias", &ab},
                                {"model.b.weight", &bw},
                                {"model.b.bias", &bb}},
                               {})
                  .ok());
  EXPECT_THAT(error(prefixed),
              ::testing::EndsWith("; the file has \"model.a.weight\": its "
                                  "names carry a prefix \"model.\" the "
                                  "model's lack"));
  // An integer tensor of the right name is named with its dtype (it read
  // as missing: the reader leaves integers out).
  const std::string ints = dir + "/ints.safetensors";
  {
    const std::string header =
        R"({"a.weight": {"dtype": "I32", "shape": [2, 3], )"
        R"("data_offsets": [0, 24]}})";
    std::string file(8, '\0');
    for (int i = 0; i < 8; ++i)
      file[i] = static_cast<char>(header.size() >> (8 * i));
    file += header + std::string(24, '\0');
    std::ofstream(ints, std::ios::binary) << file;
  }
  EXPECT_EQ(error(ints), "model.init.safetensors: \"" + ints +
                             "\" tensor \"a.weight\" is I32; a parameter's "
                             "initial weights must be floating point (F32, "
                             "F16, BF16 or F64)");
  absl::StatusOr<std::unique_ptr<Graph>> lenient_ints =
      Graph::Build(Model(lenient(ints)), 1);
  ASSERT_FALSE(lenient_ints.ok()) << "allow_missing kept its initializer";
  EXPECT_THAT(std::string(lenient_ints.status().message()),
              ::testing::HasSubstr("tensor \"a.weight\" is I32"));
  // A NaN is named before training diverges on it.
  const std::string nan = dir + "/nan.safetensors";
  Tensor bad_bias({4}, {0, 0, std::nanf(""), 0});
  ASSERT_TRUE(WriteSafetensors(nan,
                               {{"a.weight", &aw},
                                {"a.bias", &ab},
                                {"b.weight", &bw},
                                {"b.bias", &bad_bias}},
                               {})
                  .ok());
  EXPECT_EQ(error(nan), "model.init.safetensors: \"" + nan +
                            "\" tensor \"b.bias\" holds NaN (element 2 of "
                            "4): training from it would diverge");
}

}  // namespace
}  // namespace lockstep
