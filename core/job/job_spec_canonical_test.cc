// The canonical job JSON: every variant of a job round-trips through it
// unchanged, and the minimal job's canonical form, field by field.
#include "core/job/job_spec.h"

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/job/job_spec_test_util.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using Json = nlohmann::json;
using testing::kFull;
using testing::kMinimal;
using testing::MustParse;

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
        j["cluster"] = {{"collective", "ring"},  {"ring_chunk_kib", 64},
                        {"ring_streams", 3},     {"compression", "bf16"},
                        {"ring_checksum", true}, {"shard", "optimizer"},
                        {"copies", false}};
      },
      [](Json& j) {
        j["cluster"] = {{"shard", "gradients"}};
      },
      [](Json& j) {
        j["model"]["layers"][0]["trainable"] = false;
        j["model"]["init"] = {{"safetensors", "/w/base.safetensors"},
                              {"allow_missing", true}};
      },
      [](Json& j) { j["precision"] = "bf16"; },
      [](Json& j) { j["precision"] = "fp16"; },
  };
  for (const std::string& doc : docs) {
    for (size_t v = 0; v < variants.size(); ++v) {
      Json j = Json::parse(doc);
      variants[v](j);
      JobSpec s = MustParse(j.dump(), "base");
      if (v == 3) {
        EXPECT_EQ(s.cluster.compression, Compression::kBf16);
        EXPECT_EQ(s.cluster.ring_streams, 3);
        EXPECT_TRUE(s.cluster.ring_checksum);
        EXPECT_EQ(s.cluster.shard, ShardMode::kOptimizer);
        EXPECT_FALSE(s.cluster.copies);
      }
      if (v == 4) {
        EXPECT_EQ(s.cluster.shard, ShardMode::kGradients);
        EXPECT_TRUE(s.cluster.copies);
        EXPECT_EQ(ShardModeName(s.cluster.shard), "gradients");
      }
      if (v == 5) {
        EXPECT_FALSE(s.model.layers[0].trainable);
        EXPECT_TRUE(s.model.init_allow_missing);
      }
      EXPECT_EQ(s.precision, v == 6   ? Precision::kBf16
                             : v == 7 ? Precision::kFp16
                                      : Precision::kFp32);
      std::string canonical = JobSpecToJson(s);
      // Written only when not the default fp32.
      const Json written = Json::parse(canonical);
      EXPECT_EQ(written.contains("precision"), v >= 6) << canonical;
      if (v >= 6) {
        EXPECT_EQ(written["precision"], v == 6 ? "bf16" : "fp16");
      }
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
  "gradient_accumulation_steps": 1,
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
    "ring_checksum": false,
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

}  // namespace
}  // namespace lockstep
