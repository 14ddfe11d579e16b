// Job file parsing: a full spec, defaults, the canonical round trip, and
// the exact message for each kind of bad field.
#include "core/job/job_spec.h"

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "core/data/csv_format.h"
#include "core/data/idx_format.h"
#include "core/data/synthetic_format.h"
#include "core/data/text_format.h"
#include "core/json_util.h"
#include "core/layers/registry.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using Json = nlohmann::json;

constexpr char kFull[] = R"({
  "name": "mnist_cnn",
  "seed": 42,
  "model": {"input_shape": [28, 28, 1], "layers": [
      {"type": "conv2d", "filters": 32, "kernel_size": 3, "strides": 1,
       "padding": "valid", "activation": "relu"},
      {"type": "max_pool2d", "pool_size": 2},
      {"type": "conv2d", "filters": 8, "kernel_size": [3, 5],
       "strides": [1, 2], "padding": "same", "use_bias": false},
      {"type": "flatten"},
      {"type": "dense", "units": 64, "activation": "relu", "name": "hidden"},
      {"type": "dropout", "rate": 0.2},
      {"type": "dense", "units": 10, "activation": "softmax"}]},
  "loss": "sparse_categorical_crossentropy",
  "optimizer": {"type": "adam", "learning_rate": 0.001},
  "lr_schedule": {"type": "piecewise", "unit": "epoch", "boundaries": [3, 7],
                  "values": [1e-3, 1e-4, 1e-5], "warmup_steps": 0},
  "data": {"format": "mnist_idx", "train_images": "train-images.gz",
           "train_labels": "/abs/train-labels.gz",
           "test_images": "t10k-images.gz", "test_labels": "t10k-labels.gz",
           "scale": 255, "shuffle": true, "num_classes": 10},
  "batch_size_per_replica": 64,
  "epochs": 3,
  "checkpoint": {"every_steps": 500, "keep": 3},
  "summary": {"every_steps": 100},
  "cluster": {"workers": 2, "replicas_per_worker": 4, "collective": "nccl"}
})";

// The smallest valid job.
constexpr char kMinimal[] = R"({
  "name": "tiny",
  "model": {"input_shape": [4], "layers": [{"type": "dense", "units": 2}]},
  "data": {"format": "synthetic"},
  "steps": 10
})";

// A parsed layer's own fields.
Json Config(const LayerSpec& l) { return Json::parse(l.config); }

JobSpec MustParse(const std::string& text, const std::string& base = "") {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(text, base);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : JobSpec();
}

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
  EXPECT_EQ(s.loss, LossType::kSparseCategoricalCrossentropy);
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
}

TEST(JobSpecTest, Defaults) {
  JobSpec s = MustParse(kMinimal);
  EXPECT_EQ(s.seed, 0u);
  EXPECT_EQ(s.model.layers[0].name, "dense");
  EXPECT_EQ(s.loss, LossType::kSparseCategoricalCrossentropy);
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

TEST(JobSpecTest, RoundTrip) {
  const std::vector<std::string> docs = {kFull, kMinimal};
  std::vector<std::function<void(Json&)>> variants = {
      [](Json&) {},
      [](Json& j) {
        j["optimizer"] = {{"type", "sgd"},
                          {"learning_rate", 0.1},
                          {"momentum", 0.9},
                          {"nesterov", true},
                          {"weight_decay", 1e-4}};
        j["lr_schedule"] = {{"type", "polynomial"},
                            {"decay_steps", 1000},
                            {"end_learning_rate", 1e-5},
                            {"power", 0.5},
                            {"warmup_steps", 100}};
        j["loss"] = "mse";
      },
      [](Json& j) {
        j["data"] = {{"format", "csv"},
                     {"train_path", "a.csv"},
                     {"test_path", "/b.csv"},
                     {"header", true},
                     {"num_classes", 3}};
        j["optimizer"] = {{"type", "adamw"}, {"beta_2", 0.99}};
        j["lr_schedule"] = {{"type", "piecewise"},
                            {"unit", "step"},
                            {"boundaries", {100.5, 2000}},
                            {"values", {0.1, 0.01, 0.001}}};
        j["seed"] = 18446744073709551615ull;
      },
      [](Json& j) {
        j["cluster"] = {{"collective", "ring"},
                        {"ring_chunk_kib", 64},
                        {"ring_streams", 3},
                        {"compression", "bf16"}};
      },
      [](Json& j) {
        j["model"]["layers"][0]["trainable"] = false;
        j["model"]["init"] = {{"safetensors", "/w/base.safetensors"},
                              {"allow_missing", true}};
      },
  };
  for (const std::string& doc : docs) {
    for (size_t v = 0; v < variants.size(); ++v) {
      Json j = Json::parse(doc);
      variants[v](j);
      JobSpec s = MustParse(j.dump(), "base");
      if (v == 3) {
        EXPECT_EQ(s.cluster.compression, Compression::kBf16);
        EXPECT_EQ(s.cluster.ring_streams, 3);
      }
      if (v == 4) {
        EXPECT_FALSE(s.model.layers[0].trainable);
        EXPECT_TRUE(s.model.init_allow_missing);
      }
      std::string canonical = JobSpecToJson(s);
      JobSpec again = MustParse(canonical);
      EXPECT_TRUE(again == s) << "variant " << v << "\n" << canonical;
      EXPECT_EQ(JobSpecToJson(again), canonical);
    }
  }
}

TEST(JobSpecTest, CanonicalJson) {
  JobSpec s = MustParse(kMinimal);
  EXPECT_EQ(JobSpecToJson(s), R"({
  "name": "tiny",
  "seed": 0,
  "model": {
    "input_shape": [
      4
    ],
    "layers": [
      {
        "type": "dense",
        "name": "dense",
        "units": 2,
        "activation": "linear",
        "use_bias": true
      }
    ]
  },
  "loss": "sparse_categorical_crossentropy",
  "optimizer": {
    "type": "adam",
    "learning_rate": 0.001,
    "beta_1": 0.9,
    "beta_2": 0.999,
    "epsilon": 1e-07,
    "weight_decay": 0.0
  },
  "lr_schedule": {
    "type": "constant",
    "warmup_steps": 0
  },
  "data": {
    "format": "synthetic",
    "train_samples": 8192,
    "test_samples": 2048,
    "seed": 1234,
    "scale": 1.0,
    "shuffle": true,
    "num_classes": 10
  },
  "batch_size_per_replica": 32,
  "steps": 10,
  "checkpoint": {
    "every_steps": 0,
    "keep": 3
  },
  "summary": {
    "every_steps": 100
  },
  "cluster": {
    "workers": 1,
    "replicas_per_worker": 1,
    "collective": "ring",
    "bucket_kib": 1024,
    "ring_chunk_kib": 4096,
    "ring_streams": 0,
    "compression": "none",
    "fingerprint_every_steps": 100,
    "allow_tf32": false
  },
  "restart": {
    "max_restarts": 3,
    "backoff_seconds": 1.0,
    "replacement_timeout_seconds": 120.0
  }
}
)");
}

struct BadCase {
  std::string label;
  std::function<void(Json&)> mutate;
  std::string message;
};

class BadSpecTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadSpecTest, RejectedWithExactMessage) {
  Json j = Json::parse(kFull);
  GetParam().mutate(j);
  absl::StatusOr<JobSpec> spec = ParseJobSpec(j.dump());
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(spec.status().message(), GetParam().message);
}

Json& Layer(Json& j, int i) { return j["model"]["layers"][i]; }

INSTANTIATE_TEST_SUITE_P(
    All, BadSpecTest,
    ::testing::Values(
        BadCase{"NegativeLearningRate",
                [](Json& j) { j["optimizer"]["learning_rate"] = -1; },
                "optimizer.learning_rate: must be > 0, got -1"},
        BadCase{"LearningRateString",
                [](Json& j) { j["optimizer"]["learning_rate"] = "0.1"; },
                "optimizer.learning_rate: must be a number, got \"0.1\""},
        BadCase{"UnknownLayerType",
                [](Json& j) { Layer(j, 2)["type"] = "dense3"; },
                "model.layers[2].type: unknown layer type \"dense3\"; "
                "expected one of " +
                    absl::StrJoin(LayerTypeNames(), ", ")},
        BadCase{"BatchSizeString",
                [](Json& j) { j["batch_size_per_replica"] = "64"; },
                "batch_size_per_replica: must be an integer >= 1, got \"64\""},
        BadCase{"BatchSizeZero",
                [](Json& j) { j["batch_size_per_replica"] = 0; },
                "batch_size_per_replica: must be an integer >= 1, got 0"},
        BadCase{"BatchSizeFraction",
                [](Json& j) { j["batch_size_per_replica"] = 6.5; },
                "batch_size_per_replica: must be an integer >= 1, got 6.5"},
        BadCase{"MissingIdxPath",
                [](Json& j) { j["data"].erase("train_images"); },
                "data.train_images: required for format \"mnist_idx\""},
        BadCase{"EpochsAndSteps", [](Json& j) { j["steps"] = 100; },
                "epochs: give exactly one of epochs or steps"},
        BadCase{"NeitherEpochsNorSteps", [](Json& j) { j.erase("epochs"); },
                "epochs: give exactly one of epochs or steps"},
        BadCase{"MisspelledOptimizerField",
                [](Json& j) { j["optimizer"]["learnig_rate"] = 0.1; },
                "optimizer.learnig_rate: unknown field"},
        BadCase{"FieldOfAnotherOptimizer",
                [](Json& j) { j["optimizer"]["momentum"] = 0.9; },
                "optimizer.momentum: unknown field for optimizer type "
                "\"adam\""},
        BadCase{"UnknownTopLevelField", [](Json& j) { j["epoch"] = 3; },
                "epoch: unknown field"},
        BadCase{"FieldOfAnotherLayerType",
                [](Json& j) { Layer(j, 3)["units"] = 3; },
                "model.layers[3].units: unknown field for a flatten layer"},
        BadCase{"MissingName", [](Json& j) { j.erase("name"); },
                "name: required"},
        BadCase{"NameWithSlash", [](Json& j) { j["name"] = "a/b"; },
                "name: must match [A-Za-z0-9_.-]{1,64}, got \"a/b\""},
        BadCase{"NameDotDot", [](Json& j) { j["name"] = ".."; },
                "name: must not be \".\" or \"..\", got \"..\""},
        BadCase{"NegativeSeed", [](Json& j) { j["seed"] = -1; },
                "seed: must be a non-negative integer, got -1"},
        BadCase{"DropoutRateOne", [](Json& j) { Layer(j, 5)["rate"] = 1; },
                "model.layers[5].rate: must be in [0, 1), got 1"},
        BadCase{"DropoutWithoutRate",
                [](Json& j) { Layer(j, 5).erase("rate"); },
                "model.layers[5].rate: required for a dropout layer"},
        BadCase{"DenseWithoutUnits",
                [](Json& j) { Layer(j, 4).erase("units"); },
                "model.layers[4].units: required for a dense layer"},
        BadCase{"BadKernelSize",
                [](Json& j) {
                  Layer(j, 0)["kernel_size"] = {3, 0};
                },
                "model.layers[0].kernel_size: must be an integer >= 1 or a "
                "pair [h, w] of them, got [3,0]"},
        BadCase{"UnknownActivation",
                [](Json& j) { Layer(j, 0)["activation"] = "swish"; },
                "model.layers[0].activation: unknown activation \"swish\"; "
                "expected one of relu, gelu, tanh, sigmoid, softmax, linear, "
                "relu6"},
        BadCase{"UnknownPadding",
                [](Json& j) { Layer(j, 0)["padding"] = "full"; },
                "model.layers[0].padding: unknown padding \"full\"; expected "
                "one of valid, same"},
        BadCase{"DuplicateLayerName",
                [](Json& j) { Layer(j, 6)["name"] = "hidden"; },
                "model.layers[6].name: duplicate layer name \"hidden\" (also "
                "model.layers[4])"},
        BadCase{"LayerNotObject", [](Json& j) { Layer(j, 1) = "flatten"; },
                "model.layers[1]: must be an object, got \"flatten\""},
        BadCase{"EmptyLayers",
                [](Json& j) { j["model"]["layers"] = Json::array(); },
                "model.layers: must be a non-empty array of layers, got []"},
        BadCase{"InputShapeZero",
                [](Json& j) { j["model"]["input_shape"][1] = 0; },
                "model.input_shape[1]: must be an integer >= 1, got 0"},
        BadCase{"UnknownLoss", [](Json& j) { j["loss"] = "hinge"; },
                "loss: unknown loss \"hinge\"; expected one of "
                "sparse_categorical_crossentropy, mse, binary_crossentropy"},
        BadCase{"UnknownOptimizer",
                [](Json& j) { j["optimizer"]["type"] = "rmsprop"; },
                "optimizer.type: unknown optimizer type \"rmsprop\"; expected "
                "one of sgd, adam, adamw"},
        BadCase{"BetaOne", [](Json& j) { j["optimizer"]["beta_1"] = 1.0; },
                "optimizer.beta_1: must be in [0, 1), got 1.0"},
        BadCase{"ScheduleValuesCount",
                [](Json& j) {
                  j["lr_schedule"]["values"] = {0.1, 0.01};
                },
                "lr_schedule.values: must have one more entry than "
                "boundaries (3), got 2"},
        BadCase{"ScheduleBoundariesNotIncreasing",
                [](Json& j) {
                  j["lr_schedule"]["boundaries"] = {7, 3};
                },
                "lr_schedule.boundaries[1]: must be greater than the "
                "boundary before it (7), got 3"},
        BadCase{"PolynomialWithoutDecaySteps",
                [](Json& j) {
                  j["lr_schedule"] = {{"type", "polynomial"}};
                },
                "lr_schedule.decay_steps: required for schedule type "
                "\"polynomial\""},
        BadCase{"ScheduleUnit",
                [](Json& j) { j["lr_schedule"]["unit"] = "batch"; },
                "lr_schedule.unit: unknown unit \"batch\"; expected one of "
                "epoch, step"},
        BadCase{"UnknownFormat", [](Json& j) { j["data"]["format"] = "npz"; },
                "data.format: unknown data format \"npz\"; expected one of "
                "csv, image_folder, mnist_idx, synthetic, text"},
        BadCase{"CsvFieldInIdx", [](Json& j) { j["data"]["header"] = true; },
                "data.header: unknown field for format \"mnist_idx\""},
        BadCase{"EmptyPath", [](Json& j) { j["data"]["test_images"] = ""; },
                "data.test_images: must not be empty"},
        BadCase{"TrainableNotBool",
                [](Json& j) { j["model"]["layers"][0]["trainable"] = "no"; },
                "model.layers[0].trainable: must be true or false, got \"no\""},
        BadCase{"InitAllowMissingNotBool",
                [](Json& j) {
                  j["model"]["init"] = {{"safetensors", "w.safetensors"},
                                        {"allow_missing", 1}};
                },
                "model.init.allow_missing: must be true or false, got 1"},
        BadCase{"ShuffleNotBool", [](Json& j) { j["data"]["shuffle"] = 1; },
                "data.shuffle: must be true or false, got 1"},
        BadCase{"ScaleZero", [](Json& j) { j["data"]["scale"] = 0; },
                "data.scale: must be > 0, got 0"},
        BadCase{"DataNotObject", [](Json& j) { j["data"] = "mnist"; },
                "data: must be an object, got \"mnist\""},
        BadCase{"KeepZero", [](Json& j) { j["checkpoint"]["keep"] = 0; },
                "checkpoint.keep: must be an integer >= 1, got 0"},
        BadCase{"SummaryUnknown",
                [](Json& j) { j["summary"]["every_secs"] = 5; },
                "summary.every_secs: unknown field"},
        BadCase{"Workers", [](Json& j) { j["cluster"]["workers"] = -2; },
                "cluster.workers: must be an integer >= 1, got -2"},
        BadCase{"BucketZero", [](Json& j) { j["cluster"]["bucket_kib"] = 0; },
                "cluster.bucket_kib: must be an integer >= 1, got 0"},
        BadCase{"RingChunkTooSmall",
                [](Json& j) { j["cluster"]["ring_chunk_kib"] = 2; },
                "cluster.ring_chunk_kib: must be an integer >= 4, got 2"},
        BadCase{"RingChunkTooLarge",
                [](Json& j) { j["cluster"]["ring_chunk_kib"] = 2000000; },
                "cluster.ring_chunk_kib: at most 1048576 (1 GiB messages), "
                "got 2000000"},
        BadCase{"TooManyRingStreams",
                [](Json& j) { j["cluster"]["ring_streams"] = 17; },
                "cluster.ring_streams: at most 16 streams, got 17"},
        BadCase{"Tf32NotABoolean",
                [](Json& j) { j["cluster"]["allow_tf32"] = "yes"; },
                "cluster.allow_tf32: must be true or false, got \"yes\""},
        BadCase{"FingerprintEveryNegative",
                [](Json& j) { j["cluster"]["fingerprint_every_steps"] = -1; },
                "cluster.fingerprint_every_steps: must be an integer >= 0, "
                "got -1"},
        BadCase{"MaxRestarts",
                [](Json& j) { j["restart"]["max_restarts"] = -1; },
                "restart.max_restarts: must be an integer >= 0, got -1"},
        BadCase{
            "ReplacementTimeout",
            [](Json& j) { j["restart"]["replacement_timeout_seconds"] = 0; },
            "restart.replacement_timeout_seconds: must be > 0, got 0"},
        BadCase{"RestartUnknownField",
                [](Json& j) { j["restart"]["retries"] = 2; },
                "restart.retries: unknown field"},
        BadCase{"Compression",
                [](Json& j) { j["cluster"]["compression"] = "fp8"; },
                "cluster.compression: unknown compression \"fp8\"; expected "
                "one of none, bf16"},
        BadCase{"CompressionWithNccl",
                [](Json& j) {
                  j["cluster"]["collective"] = "nccl";
                  j["cluster"]["compression"] = "bf16";
                },
                "cluster.compression: \"bf16\" compresses the gRPC ring; "
                "NCCL's all-reduce (collective \"nccl\") is float32 only: "
                "use collective \"ring\" or compression \"none\""},
        BadCase{"Collective",
                [](Json& j) { j["cluster"]["collective"] = "mpi"; },
                "cluster.collective: unknown collective \"mpi\"; expected "
                "one of ring, nccl, auto"},
        BadCase{"NotAnObject", [](Json& j) { j = Json::array({1, 2}); },
                "job: must be an object, got [1,2]"},
        BadCase{
            "LongValueShortened",
            [](Json&
                   j) { j["batch_size_per_replica"] = std::string(100, 'x'); },
            "batch_size_per_replica: must be an integer >= 1, got \"" +
                std::string(56, 'x') + "..."}),
    [](const ::testing::TestParamInfo<BadCase>& info) {
      return info.param.label;
    });

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

TEST(JobSpecTest, MalformedJsonNamesLineAndColumn) {
  absl::StatusOr<JobSpec> s =
      ParseJobSpec("{\n  \"name\": \"x\",\n  \"seed\": ,\n}");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(),
            "job: malformed JSON at line 3, column 11: syntax error while "
            "parsing value - unexpected ','; expected '[', '{', or a "
            "literal");
}

TEST(JobSpecTest, LineAndColumn) {
  int64_t line = 0, column = 0;
  LineAndColumn("ab\ncd", 3, &line, &column);
  EXPECT_EQ(line, 2);
  EXPECT_EQ(column, 1);
  LineAndColumn("ab\ncd", 1, &line, &column);
  EXPECT_EQ(line, 1);
  EXPECT_EQ(column, 2);
  LineAndColumn("ab", 99, &line, &column);  // past the end: clamped
  EXPECT_EQ(line, 1);
  EXPECT_EQ(column, 3);
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

TEST(JobSpecTest, TruncatedAndEmptyInput) {
  absl::StatusOr<JobSpec> s = ParseJobSpec("");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message().substr(0, 40),
            "job: malformed JSON at line 1, column 1:");
  s = ParseJobSpec("{\"name\": \"x\"");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message().substr(0, 41),
            "job: malformed JSON at line 1, column 13:");
  s = ParseJobSpec("{\"name\": \"\xff\"}");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lockstep
