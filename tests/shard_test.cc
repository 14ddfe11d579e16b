// Sharded optimizer state (cluster.shard "optimizer", ZeRO-1, and
// "gradients", ZeRO-2: between steps a worker keeps only its part of the
// gradients too) on a real
// local cluster (`lockstep coordinator` and three `lockstep worker`
// processes on 127.0.0.1): a sharded run of the MLP, CNN (batch norm) and
// BERT jobs on 2 and 3 workers ends on the fingerprint of the unsharded run
// (also with bf16 gradients on the wire, and without copies: each worker's
// part kept by the next one too, 2/N of the state, or 1/N) and leaves
// checkpoint files with
// the same bytes (the coordinator puts the optimizer state together from
// the ranks' parts); a checkpoint written
// sharded resumes unsharded on another world size and the other way round,
// to the same bytes.
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cluster_fixture.h"
#include "tests/subprocess.h"

namespace lockstep {
namespace {

using cluster_fixture::ClusterTest;
using cluster_fixture::TinyJob;
using testing::ReadFileOrEmpty;
using testing::RunResult;

class ShardTest : public ClusterTest {
 protected:
  // Submits `job` and waits; the job's result.json.
  nlohmann::json Run(const nlohmann::json& job, bool resume = false) {
    const std::string name = job["name"];
    const std::string file = WriteJob(job, name + ".json");
    std::vector<std::string> args = {"submit", file, "--wait"};
    if (resume) args.push_back("--resume");
    RunResult r = Client(args, 300);
    EXPECT_EQ(r.exit.exit_code, 0) << r.out << r.err;
    last_out_ = r.out;
    return Result(storage_, name);
  }
  std::string last_out_;  // the last Run's `submit --wait` output
  // The bytes of a committed checkpoint's file.
  std::string CheckpointFile(const std::string& job, int64_t step,
                             const std::string& file) {
    char folder[32];
    snprintf(folder, sizeof(folder), "step-%08lld",
             static_cast<long long>(step));
    return ReadFileOrEmpty(storage_ + "/jobs/" + job + "/checkpoints/" +
                           folder + "/" + file);
  }
  std::string TextFile() {
    std::string text;
    for (int i = 0; i < 8; ++i) {
      text +=
          "the cat sat on the mat\na dog ran in the park\n"
          "my bird flew over the house\nhis fish swam under the boat\n";
    }
    const std::string path = dir_ + "/sentences.txt";
    testing::WriteStringToFile(path, text);
    return path;
  }
};

// The three models of the test, with the optimizer features whose state or
// arithmetic sharding touches: AdamW with weight decay and a global clip
// norm (every rank's part of the norm is summed exactly), SGD with momentum
// and batch norm's moving averages.
nlohmann::json Models(const std::string& text_file, const std::string& which) {
  if (which == "mlp") {
    return TinyJob(nlohmann::json::parse(R"({"epochs": 2,
      "optimizer": {"type": "adamw", "learning_rate": 0.003,
                    "weight_decay": 0.01, "global_clipnorm": 0.5,
                    "exclude_from_weight_decay": ["bias"]}})"));
  }
  if (which == "cnn") {
    return TinyJob(nlohmann::json::parse(R"({"epochs": 2,
      "model": {"input_shape": [8, 8, 1], "layers": [
        {"type": "conv2d", "name": "conv", "filters": 8, "kernel_size": 3,
         "padding": 1, "use_bias": false},
        {"type": "batch_norm", "name": "bn", "momentum": 0.9,
         "activation": "relu6"},
        {"type": "flatten"},
        {"type": "dense", "units": 10}]},
      "optimizer": {"type": "sgd", "learning_rate": 0.05, "momentum": 0.9,
                    "nesterov": true}})"));
  }
  nlohmann::json bert = nlohmann::json::parse(R"({"name": "bert", "seed": 3,
    "model": {"preset": "bert_mlm", "vocab_size": 128, "hidden": 32,
              "layers": 1, "heads": 2, "intermediate": 64,
              "max_positions": 16, "dropout": 0.1},
    "optimizer": {"type": "adamw", "learning_rate": 0.005,
                  "exclude_from_weight_decay": ["LayerNorm", "bias"],
                  "global_clipnorm": 1.0},
    "data": {"format": "text", "min_line_chars": 1, "vocab_size": 128,
             "sequence_length": 12, "pack_lines": false,
             "max_predictions": 2},
    "batch_size_per_replica": 4, "epochs": 3,
    "checkpoint": {"every_steps": 0, "keep": 2},
    "summary": {"every_steps": 1000},
    "cluster": {"workers": 2, "fingerprint_every_steps": 5,
                "bucket_kib": 4}})");
  bert["data"]["train_path"] = text_file;
  bert["data"]["test_path"] = text_file;
  return bert;
}

TEST_F(ShardTest, ShardedRunsEndOnTheUnshardedBytes) {
  StartWorkers(3);
  const std::string text = TextFile();
  struct Case {
    std::string model;
    int workers;
    bool bf16 = false;  // cluster.compression: the owners keep rounded sums
    bool copies = true;  // cluster.copies (each part also on the next rank)
    // cluster.shard: "gradients" (ZeRO-2) also hands back the pages of the
    // gradients outside a worker's part between steps.
    std::string shard = "optimizer";
  };
  // The unsharded run of each model, world and wire, run once.
  struct Whole {
    std::string name, fingerprint;
    int64_t steps = 0;
    double state_bytes = 0;
  };
  std::map<std::string, Whole> wholes;
  for (const Case& c :
       std::vector<Case>{{"mlp", 2},
                         {"cnn", 2},
                         {"bert", 2},
                         {"mlp", 3},
                         {"bert", 3},
                         {"mlp", 3, true},
                         {"mlp", 3, false, false},
                         {"cnn", 2, false, true, "gradients"},
                         {"bert", 3, false, true, "gradients"},
                         {"mlp", 3, true, false, "gradients"}}) {
    std::string fingerprint[2];
    int64_t steps[2] = {0, 0};
    double state_bytes[2] = {0, 0};
    const std::string base =
        c.model + std::to_string(c.workers) + (c.bf16 ? "bf16" : "");
    const std::string variant =
        (c.copies ? "" : "nocopies") +
        (c.shard == "optimizer" ? std::string() : c.shard);
    for (int sharded = 0; sharded < 2; ++sharded) {
      if (!sharded && wholes.count(base) > 0) {
        fingerprint[0] = wholes[base].fingerprint;
        steps[0] = wholes[base].steps;
        state_bytes[0] = wholes[base].state_bytes;
        continue;
      }
      nlohmann::json job = Models(text, c.model);
      const std::string name = base + (sharded ? variant + "sharded" : "whole");
      job["name"] = name;
      job["cluster"]["workers"] = c.workers;
      if (c.bf16) job["cluster"]["compression"] = "bf16";
      if (sharded) {
        job["cluster"]["shard"] = c.shard;
        if (!c.copies) job["cluster"]["copies"] = false;
      }
      const nlohmann::json res = Run(job);
      ASSERT_TRUE(res.is_object()) << name;
      fingerprint[sharded] = res.value("fingerprint", "");
      steps[sharded] = res.value("steps", 0);
      state_bytes[sharded] = res.value("optimizer_state_bytes", 0.0);
      if (!sharded) {
        wholes[base] = {name, fingerprint[0], steps[0], state_bytes[0]};
      }
      EXPECT_EQ(res.value("shard", ""), sharded ? c.shard : "none") << name;
      // Copies on 2 workers keep the whole state: the job says so.
      EXPECT_EQ(last_out_.find("note: cluster.copies: on 2 workers") !=
                    std::string::npos,
                sharded && c.copies && c.workers == 2)
          << name << "\n"
          << last_out_;
      if (sharded) {
        EXPECT_EQ(res.value("copies", !c.copies), c.copies) << name;
      }
    }
    const std::string what = c.model + " on " + std::to_string(c.workers) +
                             (c.bf16 ? " (bf16 on the wire)" : "") +
                             (c.copies ? "" : " (no copies)") + " shard " +
                             c.shard;
    EXPECT_EQ(fingerprint[1], fingerprint[0]) << what;
    // A worker keeps 1/N of the state, 2/N with copies (ring segments
    // differ by at most one element per bucket).
    EXPECT_GT(state_bytes[0], 0) << what;
    EXPECT_NEAR(state_bytes[1] * c.workers / state_bytes[0],
                c.copies ? 2.0 : 1.0, 0.02)
        << what;
    EXPECT_EQ(fingerprint[0].size(), 32u) << what;
    ASSERT_EQ(steps[0], steps[1]);
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
      const std::string whole = CheckpointFile(base + "whole", steps[0], file);
      EXPECT_GT(whole.size(), 1000u) << what << " " << file;
      EXPECT_TRUE(whole ==
                  CheckpointFile(base + variant + "sharded", steps[0], file))
          << what << ": " << file << " differs";
    }
  }
}

// A checkpoint written with sharded state on 3 workers (2 replicas each)
// resumes with the state whole on 2 workers (3 replicas each: the same
// global batch), and one written whole on 3 resumes sharded on 2: both end
// on the same bytes, and the two checkpoints of step 11 are the same files.
TEST_F(ShardTest, CheckpointsMoveBetweenShardedAndWholeAndWorldSizes) {
  StartWorkers(3, /*replicas=*/3);
  std::string fingerprint[2];
  for (int first_sharded = 0; first_sharded < 2; ++first_sharded) {
    nlohmann::json job = TinyJob(nlohmann::json::parse(R"({"epochs": 1,
      "optimizer": {"type": "adam", "learning_rate": 0.003,
                    "global_clipnorm": 0.5},
      "cluster": {"workers": 3, "replicas_per_worker": 2}})"));
    job["name"] = first_sharded ? "fromsharded" : "fromwhole";
    // ZeRO-2 with 2 replicas a worker: the other replica's gradients are
    // handed back too once summed.
    if (first_sharded) job["cluster"]["shard"] = "gradients";
    nlohmann::json res = Run(job);
    ASSERT_EQ(res.value("steps", 0), 11) << res.dump();  // ceil(1000 / 96)
    job["epochs"] = 2;
    job["cluster"]["workers"] = 2;
    job["cluster"]["replicas_per_worker"] = 3;
    job["cluster"]["shard"] = first_sharded ? "none" : "optimizer";
    res = Run(job, /*resume=*/true);
    EXPECT_EQ(res.value("steps", 0), 22) << res.dump();
    fingerprint[first_sharded] = res.value("fingerprint", "");
  }
  EXPECT_EQ(fingerprint[0].size(), 32u);
  EXPECT_EQ(fingerprint[0], fingerprint[1]);
  // `status` says how the state was held and how much of it per worker.
  RunResult st = Client({"status", "fromwhole"});
  EXPECT_TRUE(std::regex_search(
      st.out, std::regex(R"(optimizer state: sharded over the workers )"
                         R"(\(cluster\.shard optimizer\), each part also )"
                         R"(kept by the next worker \(cluster\.copies\), )"
                         R"(\d+\.\d KiB per worker)")))
      << st.out;
  st = Client({"status", "fromsharded"});
  EXPECT_NE(st.out.find("optimizer state: whole on every worker"),
            std::string::npos)
      << st.out;
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    const std::string a = CheckpointFile("fromwhole", 11, file);
    EXPECT_GT(a.size(), 1000u) << file;
    EXPECT_TRUE(a == CheckpointFile("fromsharded", 11, file)) << file;
  }
}

}  // namespace
}  // namespace lockstep
