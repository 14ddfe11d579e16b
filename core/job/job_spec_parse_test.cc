// Job file parsing: a full spec, defaults, generated layer names, the
// bert_mlm preset over text data, an ONNX model's fields, and loading a job
// file from disk.
#include "core/job/job_spec.h"

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "core/data/csv_format.h"
#include "core/data/idx_format.h"
#include "core/data/synthetic_format.h"
#include "core/data/text_format.h"
#include "core/job/job_spec_test_util.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using Json = nlohmann::json;
using testing::kFull;
using testing::kMinimal;
using testing::MustParse;

// A parsed layer's own fields.
Json Config(const LayerSpec& l) { return Json::parse(l.config); }

TEST(JobSpecTest, FullSpec) {
  JobSpec s = MustParse(kFull, "/data/mnist");
  EXPECT_EQ(s.name, "mnist_cnn");
  EXPECT_EQ(s.seed, 42u);
  EXPECT_EQ(s.model.single_input_shape(), (Shape{28, 28, 1}));
  ASSERT_EQ(s.model.inputs.size(), 1u);
  EXPECT_EQ(s.model.inputs[0].name, "input");
  EXPECT_EQ(s.model.param_names, ParamNaming::kKeras);
  ASSERT_EQ(s.model.layers.size(), 7u);
  const LayerSpec& c = s.model.layers[0];
  EXPECT_EQ(c.type, "conv2d");
  EXPECT_EQ(c.name, "conv2d");
  EXPECT_TRUE(c.inputs.empty());  // the previous layer
  EXPECT_EQ(Config(c), Json::parse(R"({"filters": 32, "kernel_size": [3, 3],
      "strides": [1, 1], "padding": "valid", "activation": "relu",
      "use_bias": true, "groups": 1})"));
  const LayerSpec& pool = s.model.layers[1];
  EXPECT_EQ(pool.name, "max_pooling2d");
  // Strides default to pool_size, as Keras.
  EXPECT_EQ(Config(pool), Json::parse(R"({"pool_size": [2, 2],
      "strides": [2, 2], "padding": "valid"})"));
  const LayerSpec& c2 = s.model.layers[2];
  EXPECT_EQ(c2.name, "conv2d_1");
  EXPECT_EQ(Config(c2)["kernel_size"], Json::parse("[3, 5]"));
  EXPECT_EQ(Config(c2)["strides"], Json::parse("[1, 2]"));
  EXPECT_EQ(Config(c2)["padding"], "same");
  EXPECT_EQ(Config(c2)["activation"], "linear");
  EXPECT_EQ(Config(c2)["use_bias"], false);
  EXPECT_EQ(s.model.layers[3].name, "flatten");
  EXPECT_EQ(s.model.layers[4].name, "hidden");
  EXPECT_EQ(Config(s.model.layers[4])["units"], 64);
  EXPECT_DOUBLE_EQ(Config(s.model.layers[5])["rate"].get<double>(), 0.2);
  EXPECT_EQ(s.model.layers[6].name, "dense");
  EXPECT_EQ(Config(s.model.layers[6])["activation"], "softmax");
  EXPECT_EQ(s.loss, &LossNamed("sparse_categorical_crossentropy"));
  EXPECT_EQ(s.optimizer.type, OptimizerType::kAdam);
  EXPECT_DOUBLE_EQ(s.optimizer.learning_rate, 0.001);
  EXPECT_DOUBLE_EQ(s.optimizer.weight_decay, 0.0);
  EXPECT_EQ(s.lr_schedule.type, ScheduleType::kPiecewise);
  EXPECT_EQ(s.lr_schedule.boundaries, (std::vector<double>{3, 7}));
  EXPECT_EQ(s.lr_schedule.values, (std::vector<double>{1e-3, 1e-4, 1e-5}));
  EXPECT_EQ(s.data.format, "mnist_idx");
  const IdxConfig* idx = s.data.As<IdxConfig>();
  ASSERT_NE(idx, nullptr);
  EXPECT_EQ(s.data.As<CsvConfig>(), nullptr);
  EXPECT_EQ(idx->train_images, "/data/mnist/train-images.gz");
  EXPECT_EQ(idx->train_labels, "/abs/train-labels.gz");
  EXPECT_EQ(idx->test_labels, "/data/mnist/t10k-labels.gz");
  EXPECT_DOUBLE_EQ(s.data.scale, 255);
  EXPECT_EQ(s.batch_size_per_replica, 64);
  EXPECT_EQ(s.epochs, 3);
  EXPECT_EQ(s.steps, 0);
  EXPECT_EQ(s.checkpoint.every_steps, 500);
  EXPECT_EQ(s.cluster.collective, Collective::kNccl);
  EXPECT_EQ(s.total_replicas(), 8);
  EXPECT_EQ(s.global_batch_size(), 512);
  EXPECT_EQ(s.gradient_accumulation_steps, 1);
  EXPECT_EQ(AccumulationNote(s), "");
}

TEST(JobSpecTest, TheSampleAuditIsWrittenBackOnlyWhenOn) {
  Json j = Json::parse(kMinimal);
  JobSpec off = MustParse(j.dump());
  EXPECT_FALSE(off.audit.samples);
  EXPECT_EQ(JobSpecToJson(off).find("audit"), std::string::npos);
  j["audit"] = {{"samples", true}};
  JobSpec on = MustParse(j.dump());
  EXPECT_TRUE(on.audit.samples);
  EXPECT_NE(JobSpecToJson(on).find("\"audit\""), std::string::npos);
  EXPECT_TRUE(MustParse(JobSpecToJson(on)).audit.samples);
  EXPECT_NE(on, off);  // another job under the same name
}

TEST(JobSpecTest, AccumulationMultipliesTheGlobalBatch) {
  Json j = Json::parse(kMinimal);
  j["batch_size_per_replica"] = 16;
  j["gradient_accumulation_steps"] = 4;
  j["cluster"] = {{"workers", 2}, {"replicas_per_worker", 3}};
  JobSpec s = MustParse(j.dump());
  EXPECT_EQ(s.global_batch_size(), 16 * 4 * 6);
  EXPECT_EQ(AccumulationNote(s), " x 4 micro-batches");
  // The canonical form keeps it.
  EXPECT_EQ(MustParse(JobSpecToJson(s)).gradient_accumulation_steps, 4);
}

TEST(JobSpecTest, ElasticWorkersKeepTheGlobalBatchOfTheirMax) {
  Json j = Json::parse(kMinimal);
  j["batch_size_per_replica"] = 16;
  j["cluster"] = {{"workers", {{"min", 2}, {"max", 3}}},
                  {"replicas_per_worker", 2},
                  {"rejoin_grace_seconds", 4.5}};
  JobSpec s = MustParse(j.dump());
  EXPECT_TRUE(s.elastic());
  EXPECT_EQ(s.cluster.min_workers, 2);
  EXPECT_EQ(s.cluster.workers, 3);
  EXPECT_EQ(s.cluster.start_grace_seconds, 10);  // the default
  EXPECT_EQ(s.cluster.rejoin_grace_seconds, 4.5);
  EXPECT_EQ(s.global_batch_size(), 16 * 3 * 2);
  // The canonical form writes the range and the graces back.
  const Json canonical = Json::parse(JobSpecToJson(s));
  EXPECT_EQ(canonical["cluster"]["workers"], Json({{"min", 2}, {"max", 3}}));
  EXPECT_EQ(canonical["cluster"]["rejoin_grace_seconds"], 4.5);
  EXPECT_EQ(MustParse(JobSpecToJson(s)), s);
  // A plain number, and a range of one, are fixed-size jobs.
  j["cluster"] = {{"workers", {{"min", 2}, {"max", 2}}}};
  const JobSpec fixed = MustParse(j.dump());
  EXPECT_FALSE(fixed.elastic());
  EXPECT_EQ(Json::parse(JobSpecToJson(fixed))["cluster"]["workers"], 2);
  EXPECT_FALSE(Json::parse(JobSpecToJson(fixed))["cluster"].contains(
      "start_grace_seconds"));
}

TEST(JobSpecTest, Defaults) {
  JobSpec s = MustParse(kMinimal);
  EXPECT_EQ(s.seed, 0u);
  EXPECT_EQ(s.model.layers[0].name, "dense");
  EXPECT_EQ(s.loss, &LossNamed("sparse_categorical_crossentropy"));
  EXPECT_EQ(s.optimizer.type, OptimizerType::kAdam);
  EXPECT_DOUBLE_EQ(s.optimizer.learning_rate, 1e-3);
  EXPECT_DOUBLE_EQ(s.optimizer.epsilon, 1e-7);
  EXPECT_EQ(s.lr_schedule.type, ScheduleType::kConstant);
  const SyntheticConfig* synthetic = s.data.As<SyntheticConfig>();
  ASSERT_NE(synthetic, nullptr);
  EXPECT_EQ(synthetic->train_samples, 8192);
  EXPECT_EQ(synthetic->test_samples, 2048);
  EXPECT_EQ(synthetic->seed, 1234u);
  EXPECT_EQ(s.batch_size_per_replica, 32);
  EXPECT_EQ(s.steps, 10);
  EXPECT_EQ(s.checkpoint.keep, 3);
  EXPECT_EQ(s.summary.every_steps, 100);
  EXPECT_EQ(s.cluster.workers, 1);
  EXPECT_EQ(s.cluster.collective, Collective::kRing);
  EXPECT_EQ(s.cluster.ring_chunk_kib, 4096);
  EXPECT_EQ(s.cluster.ring_streams, 0);
  EXPECT_EQ(s.cluster.compression, Compression::kNone);
}

TEST(JobSpecTest, AdamWDefaultsToKerasWeightDecay) {
  Json j = Json::parse(kMinimal);
  j["optimizer"] = {{"type", "adamw"}};
  EXPECT_DOUBLE_EQ(MustParse(j.dump()).optimizer.weight_decay, 0.004);
  j["optimizer"]["weight_decay"] = 0;
  EXPECT_DOUBLE_EQ(MustParse(j.dump()).optimizer.weight_decay, 0.0);
}

TEST(JobSpecTest, GeneratedNamesSkipExplicitOnes) {
  Json j = Json::parse(kMinimal);
  j["model"]["layers"] = Json::parse(R"([
      {"type": "dense", "units": 3},
      {"type": "dense", "units": 3, "name": "dense_1"},
      {"type": "dense", "units": 3},
      {"type": "dense", "units": 2, "name": "dense"}])");
  JobSpec s = MustParse(j.dump());
  EXPECT_EQ(s.model.layers[0].name, "dense_2");
  EXPECT_EQ(s.model.layers[1].name, "dense_1");
  EXPECT_EQ(s.model.layers[2].name, "dense_3");
  EXPECT_EQ(s.model.layers[3].name, "dense");
}

constexpr char kBert[] = R"({
  "name": "bert",
  "model": {"preset": "bert_mlm", "vocab_size": 1000, "hidden": 64,
            "layers": 2, "heads": 2, "intermediate": 128,
            "max_positions": 64, "dropout": 0.1},
  "optimizer": {"type": "adamw", "learning_rate": 1e-4,
                "exclude_from_weight_decay": ["LayerNorm", "bias"],
                "global_clipnorm": 1.0, "scale_with_replicas": true},
  "data": {"format": "text", "train_path": ["a.txt", "b.txt"],
           "test_path": "valid.txt", "vocab_size": 1000,
           "sequence_length": 32, "max_predictions": 5},
  "epochs": 1
})";

TEST(JobSpecTest, BertPresetOverTextData) {
  JobSpec spec = MustParse(kBert, "/data");
  ASSERT_EQ(spec.model.inputs.size(), 4u);
  const char* names[] = {"token_ids", "segment_ids", "padding_mask",
                         "mask_positions"};
  const Shape shapes[] = {{32}, {32}, {32}, {5}};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(spec.model.inputs[i].name, names[i]);
    EXPECT_EQ(spec.model.inputs[i].shape, shapes[i]) << names[i];
  }
  ASSERT_EQ(spec.model.layers.size(), 1u);
  EXPECT_EQ(spec.model.layers[0].type, "bert_mlm");
  EXPECT_EQ(spec.model.layers[0].inputs,
            std::vector<std::string>(names, names + 4));
  EXPECT_EQ(Config(spec.model.layers[0])["layers"], 2);
  // A depth other than the block's default (2) reaches the block: it was
  // once dropped with the model's own keys, and every job trained 2 layers.
  for (int depth : {1, 4}) {
    Json j = Json::parse(kBert);
    j["model"]["layers"] = depth;
    EXPECT_EQ(Config(MustParse(j.dump()).model.layers[0])["layers"], depth);
  }
  EXPECT_EQ(spec.model.param_names, ParamNaming::kTorch);
  const TextConfig* text = spec.data.As<TextConfig>();
  ASSERT_NE(text, nullptr);
  EXPECT_EQ(text->train_files,
            (std::vector<std::string>{"/data/a.txt", "/data/b.txt"}));
  EXPECT_EQ(text->test_files, std::vector<std::string>{"/data/valid.txt"});
  EXPECT_EQ(spec.data.config->LabelsPerSample(), 5);
  EXPECT_EQ(spec.optimizer.exclude_from_weight_decay,
            (std::vector<std::string>{"LayerNorm", "bias"}));
  EXPECT_EQ(spec.optimizer.global_clipnorm, 1.0);
  EXPECT_TRUE(spec.optimizer.scale_with_replicas);
  // The canonical form parses back to the same job.
  JobSpec again = MustParse(JobSpecToJson(spec));
  EXPECT_EQ(JobSpecToJson(again), JobSpecToJson(spec));
}

TEST(JobSpecTest, BertPresetErrors) {
  auto error = [](const std::function<void(Json&)>& mutate) {
    Json j = Json::parse(kBert);
    mutate(j);
    absl::StatusOr<JobSpec> spec = ParseJobSpec(j.dump());
    EXPECT_FALSE(spec.ok());
    return std::string(spec.status().message());
  };
  EXPECT_EQ(error([](Json& j) { j["model"]["layers"] = Json::array(); }),
            "model.layers: unknown field for a preset model (bert_mlm "
            "declares its inputs)");
  EXPECT_EQ(error([](Json& j) { j["model"]["preset"] = "gpt"; }),
            "model.preset: unknown preset \"gpt\"; expected one of bert_mlm, "
            "mobilenet_v2");
  EXPECT_EQ(error([](Json& j) { j["model"]["heads"] = 3; }),
            "model.heads: must divide hidden (64), got 3");
  EXPECT_EQ(error([](Json& j) { j["data"].erase("vocab_size"); }),
            "data.vocab_size: required for building a vocabulary (when "
            "data.vocab is not given)");
  EXPECT_EQ(error([](Json& j) { j["data"]["max_predictions"] = 31; }),
            "data.max_predictions: must be an integer in [1, 30], got 31");
}

// "model": {"onnx": PATH, "input", "output"}: the path resolves as the
// data's, the data's field "input" feeds the graph (its shape the data's),
// the naming is torch's, and the canonical form parses back to it. The
// graph itself is read when the model is built (core/onnx, tests/onnx_*).
TEST(JobSpecTest, OnnxModel) {
  Json j = Json::parse(kMinimal);
  j["model"] = {{"onnx", "cnn.onnx"}, {"input", "pixels"}};
  JobSpec spec = MustParse(j.dump(), "/models");
  EXPECT_EQ(spec.model.onnx_path, "/models/cnn.onnx");
  EXPECT_EQ(spec.model.onnx_input, "pixels");
  EXPECT_EQ(spec.model.onnx_output, "");
  EXPECT_TRUE(spec.model.layers.empty());
  ASSERT_EQ(spec.model.inputs.size(), 1u);
  EXPECT_EQ(spec.model.inputs[0].name, "input");
  EXPECT_EQ(spec.model.inputs[0].shape, (Shape{8, 8, 1}));  // synthetic's
  EXPECT_EQ(spec.model.param_names, ParamNaming::kTorch);
  const Json canonical = Json::parse(JobSpecToJson(spec));
  EXPECT_EQ(canonical["model"],
            Json::parse(R"({"onnx": "/models/cnn.onnx", "input": "pixels",
                            "param_names": "torch"})"));
  EXPECT_EQ(MustParse(JobSpecToJson(spec)).model, spec.model);

  auto error = [&](const std::function<void(Json&)>& mutate) {
    Json bad = j;
    mutate(bad);
    absl::StatusOr<JobSpec> s = ParseJobSpec(bad.dump());
    EXPECT_FALSE(s.ok());
    return std::string(s.status().message());
  };
  EXPECT_EQ(error([](Json& b) { b["model"]["layers"] = Json::array(); }),
            "model.layers: unknown field for an ONNX model (its graph "
            "declares its input and layers)");
  EXPECT_EQ(error([](Json& b) { b["model"]["onnx"] = 3; }),
            "model.onnx: must be a string, got 3");
  EXPECT_EQ(error([](Json& b) { b["model"]["param_names"] = "keras"; }),
            "model.param_names: an ONNX model's parameters are its "
            "initializers' names (the torch state dict's): only \"torch\"");
  EXPECT_EQ(error([](Json& b) {
              b["model"] = Json::parse(kMinimal)["model"];
              b["model"]["output"] = "logits";
            }),
            "model.output: only with model.onnx (the name of the graph's "
            "input or output)");
}

// A graph with several inputs (an exported BERT): model.input lists them,
// each fed by the data field of its name (its shape the field's).
TEST(JobSpecTest, OnnxModelWithNamedInputs) {
  Json j = Json::parse(kBert);
  j["model"] = Json::parse(R"({"onnx": "bert.onnx", "input": ["token_ids",
      "segment_ids", "padding_mask", "mask_positions"]})");
  JobSpec spec = MustParse(j.dump(), "/models");
  ASSERT_EQ(spec.model.inputs.size(), 4u);
  EXPECT_EQ(spec.model.inputs[0].name, "token_ids");
  EXPECT_EQ(spec.model.inputs[0].shape, (Shape{32}));
  EXPECT_EQ(spec.model.inputs[3].name, "mask_positions");
  EXPECT_EQ(spec.model.inputs[3].shape, (Shape{5}));
  EXPECT_EQ(spec.model.onnx_input, "");
  const Json canonical = Json::parse(JobSpecToJson(spec));
  EXPECT_EQ(canonical["model"]["input"],
            Json::parse(R"(["token_ids", "segment_ids", "padding_mask",
                            "mask_positions"])"));
  EXPECT_EQ(MustParse(JobSpecToJson(spec)).model, spec.model);

  auto error = [&](const Json& input) {
    Json bad = j;
    bad["model"]["input"] = input;
    absl::StatusOr<JobSpec> s = ParseJobSpec(bad.dump());
    EXPECT_FALSE(s.ok());
    return std::string(s.status().message());
  };
  EXPECT_EQ(error(Json::array()), "model.input: an empty list");
  EXPECT_EQ(error(Json::parse(R"(["token_ids", 3])")),
            "model.input[1]: must be a graph input's name, got 3");
  EXPECT_EQ(error(Json::parse(R"(["token_ids", "token_ids"])")),
            "model.input[1]: \"token_ids\" is named twice");
  EXPECT_TRUE(absl::StrContains(error(Json::parse(R"(["token_ids", "words"])")),
                                "has no field named \"words\""));
  // No model.input: the text's fields are named, and how to list them (it
  // said model.inputs[0] has no field "input", a field never written).
  Json none = j;
  none["model"].erase("input");
  absl::StatusOr<JobSpec> s = ParseJobSpec(none.dump());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "model.input: data format \"text\" has no single input (its "
            "fields are token_ids, segment_ids, padding_mask and "
            "mask_positions): list the graph inputs it feeds, each fed by the "
            "data field of its name, as in \"input\": [\"token_ids\", "
            "\"mask_positions\"]");
}

// data.task "causal_lm": the labels are the next tokens (sequence_length a
// sample), the fields lose mask_positions, the masking fields are refused.
TEST(JobSpecTest, CausalLanguageModelText) {
  Json j = Json::parse(kBert);
  j["data"].erase("max_predictions");
  j["data"]["task"] = "causal_lm";
  j["model"] = Json::parse(R"({"onnx": "gpt.onnx", "input": ["token_ids"]})");
  JobSpec spec = MustParse(j.dump(), "/models");
  ASSERT_EQ(spec.model.inputs.size(), 1u);
  EXPECT_EQ(spec.model.inputs[0].shape, (Shape{32}));
  EXPECT_EQ(spec.data.config->LabelsPerSample(), 32);
  const Json canonical = Json::parse(JobSpecToJson(spec));
  EXPECT_EQ(canonical["data"]["task"], "causal_lm");
  EXPECT_FALSE(canonical["data"].contains("mask_rate"));
  EXPECT_EQ(MustParse(JobSpecToJson(spec)).data.config->LabelsPerSample(), 32);

  auto error = [&](const std::function<void(Json&)>& mutate) {
    Json bad = j;
    mutate(bad);
    absl::StatusOr<JobSpec> s = ParseJobSpec(bad.dump());
    EXPECT_FALSE(s.ok());
    return std::string(s.status().message());
  };
  EXPECT_EQ(error([](Json& b) { b["data"]["mask_rate"] = 0.2; }),
            "data.mask_rate: only with task \"masked_lm\" (a causal language "
            "model's labels are the next tokens)");
  EXPECT_EQ(error([](Json& b) { b["data"]["task"] = "gpt"; }),
            "data.task: must be \"masked_lm\" or \"causal_lm\", got \"gpt\"");
  EXPECT_TRUE(absl::StrContains(
      error([](Json& b) { b["model"]["input"] = {"mask_positions"}; }),
      "its fields are token_ids, segment_ids and padding_mask (task "
      "causal_lm)"));
}

class LoadJobSpecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = tmp != nullptr ? tmp : "/tmp";
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
    return path;
  }
  std::string dir_;
};

TEST_F(LoadJobSpecTest, ResolvesDataPathsAgainstTheJobFolder) {
  Json j = Json::parse(kFull);
  std::string path = Write("job.json", j.dump());
  absl::StatusOr<JobSpec> s = LoadJobSpec(path);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->data.As<IdxConfig>()->train_images, dir_ + "/train-images.gz");
  EXPECT_EQ(s->data.As<IdxConfig>()->train_labels, "/abs/train-labels.gz");
}

TEST_F(LoadJobSpecTest, MissingFile) {
  absl::StatusOr<JobSpec> s = LoadJobSpec(dir_ + "/nope.json");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.status().message(), "cannot read job file \"" + dir_ +
                                      "/nope.json\": No such file or "
                                      "directory");
}

TEST_F(LoadJobSpecTest, MalformedJsonNamesTheFile) {
  std::string path =
      Write("bad.json", "{\n  \"name\": \"x\",\n  \"seed\": ,\n}");
  absl::StatusOr<JobSpec> s = LoadJobSpec(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(s.status().message(),
                               path + ": malformed JSON at line 3, column 11:"))
      << s.status();
}

}  // namespace
}  // namespace lockstep
