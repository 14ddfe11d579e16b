// Bad job files: the exact message for each kind of bad field, and for
// malformed, truncated and empty JSON (line and column).
#include "core/job/job_spec.h"

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "core/job/job_spec_test_util.h"
#include "core/json_util.h"
#include "core/layers/registry.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using Json = nlohmann::json;
using testing::kFull;

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
        BadCase{"AccumulationZero",
                [](Json& j) { j["gradient_accumulation_steps"] = 0; },
                "gradient_accumulation_steps: must be an integer >= 1, got 0"},
        BadCase{"AccumulationFraction",
                [](Json& j) { j["gradient_accumulation_steps"] = 1.5; },
                "gradient_accumulation_steps: must be an integer >= 1, got "
                "1.5"},
        BadCase{"AccumulationTooMany",
                [](Json& j) { j["gradient_accumulation_steps"] = 1025; },
                "gradient_accumulation_steps: at most 1024 micro-batches a "
                "step, got 1025"},
        BadCase{"ElasticMinAboveMax",
                [](Json& j) {
                  j["cluster"]["workers"] = {{"min", 3}, {"max", 2}};
                },
                "cluster.workers.min: must be <= cluster.workers.max (2), "
                "got 3"},
        BadCase{"ElasticMinZero",
                [](Json& j) {
                  j["cluster"]["workers"] = {{"min", 0}, {"max", 2}};
                },
                "cluster.workers.min: must be an integer >= 1, got 0"},
        BadCase{"ElasticMaxMissing",
                [](Json& j) { j["cluster"]["workers"] = {{"min", 1}}; },
                "cluster.workers.max: required"},
        BadCase{"ElasticUnknownKey",
                [](Json& j) {
                  j["cluster"]["workers"] = {
                      {"min", 1}, {"max", 2}, {"maximum", 3}};
                },
                "cluster.workers.maximum: unknown field"},
        BadCase{"ElasticWorkersString",
                [](Json& j) { j["cluster"]["workers"] = "2-3"; },
                "cluster.workers: must be an integer >= 1, got \"2-3\""},
        BadCase{"GraceOnAFixedJob",
                [](Json& j) { j["cluster"]["rejoin_grace_seconds"] = 5; },
                "cluster.rejoin_grace_seconds: only an elastic job waits for "
                "more workers: give cluster.workers as {\"min\": M, "
                "\"max\": N} with M < N"},
        BadCase{"GraceNegative",
                [](Json& j) {
                  j["cluster"]["workers"] = {{"min", 1}, {"max", 2}};
                  j["cluster"]["start_grace_seconds"] = -1;
                },
                "cluster.start_grace_seconds: must be >= 0, got -1"},
        BadCase{"ElasticTooManyMicroBatches",
                [](Json& j) {
                  j["gradient_accumulation_steps"] = 600;
                  j["cluster"]["workers"] = {{"min", 1}, {"max", 2}};
                },
                "cluster.workers.min: at 1 of at most 2 workers each replica "
                "would take its share of the global batch in up to 1200 "
                "micro-batches; at most 1024"},
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
        BadCase{"RingChecksumNotABoolean",
                [](Json& j) { j["cluster"]["ring_checksum"] = 1; },
                "cluster.ring_checksum: must be true or false, got 1"},
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
        BadCase{"AuditSamplesNotBool",
                [](Json& j) { j["audit"]["samples"] = "yes"; },
                "audit.samples: must be true or false, got \"yes\""},
        BadCase{"AuditUnknownField",
                [](Json& j) { j["audit"]["steps"] = true; },
                "audit.steps: unknown field"},
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
        BadCase{"Precision", [](Json& j) { j["precision"] = "fp8"; },
                "precision: unknown precision \"fp8\"; expected one of "
                "fp32, bf16, fp16"},
        BadCase{"ShardMode",
                [](Json& j) { j["cluster"]["shard"] = "parameters"; },
                "cluster.shard: unknown shard mode \"parameters\"; expected "
                "one of none, optimizer, gradients"},
        BadCase{"CopiesNotABoolean",
                [](Json& j) {
                  j["cluster"]["shard"] = "optimizer";
                  j["cluster"]["copies"] = "no";
                },
                "cluster.copies: must be true or false, got \"no\""},
        BadCase{"CopiesWithoutShard",
                [](Json& j) { j["cluster"]["copies"] = true; },
                "cluster.copies: true only with cluster.shard (the copies of "
                "sharded optimizer state a neighbour keeps); this job's state "
                "is whole"},
        BadCase{"ShardWithNccl",
                [](Json& j) {
                  j["cluster"]["collective"] = "nccl";
                  j["cluster"]["shard"] = "optimizer";
                },
                "cluster.shard: sharded optimizer state runs on the gRPC "
                "ring; NCCL (collective \"nccl\") keeps it whole: use "
                "collective \"ring\" or shard \"none\""},
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

// A hostile document nested 100,000 deep is refused, naming where, before
// anything walks it (nlohmann would build it; a recursive walk or dump()
// would overflow the stack). 512 levels still parse.
TEST(JobSpecTest, NestingDeeperThan512IsRefused) {
  const std::string deep = "{\"name\": \"x\", \"seed\": " +
                           std::string(100000, '[') +
                           std::string(100000, ']') + "}";
  absl::StatusOr<JobSpec> s = ParseJobSpec(deep);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(),
            "job: JSON nested deeper than 512 levels at line 1, column 534");
  // Brackets inside strings do not count; 511 arrays inside the object is
  // 512 levels: parsed, then refused for what the field holds.
  const std::string ok_depth = "{\"name\": \"[[[[\", \"seed\": " +
                               std::string(511, '[') + std::string(511, ']') +
                               "}";
  s = ParseJobSpec(ok_depth);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message().find("nested deeper"), std::string::npos)
      << s.status().message();
}

}  // namespace
}  // namespace lockstep
