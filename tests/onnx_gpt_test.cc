// A GPT-style causal language model brought as ONNX, trained on the Brown
// corpus by a coordinator and 2 workers with the text format's causal_lm
// task (each position's label the next token), beside PyTorch training the
// module it was exported from on the same batches from the same weights
// (tests/torch_gpt_steps.py on benchmarks/data_batches' samples). After 100
// steps of Adam the test loss of lockstep's model (its checkpoint, loaded
// into the torch module by name and evaluated by torch) is within 2% of
// torch's own, both fell by more than 0.5 from the initial model's, and
// lockstep's own evaluation agrees with torch's of its checkpoint to 1e-3.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/fault_fixture.h"
#include "tests/subprocess.h"
#include "tests/torch_util.h"

namespace lockstep {
namespace {

using fault_fixture::FaultTest;
using testing::NewTempDir;
using testing::ReadFileOrEmpty;
using testing::Runfile;
using testing::RunProcess;
using testing::RunResult;

TEST_F(FaultTest, AnExportedGptLearnsOnBrownAsTorchDoes) {
  LOCKSTEP_SKIP_OR_FAIL_IF_MISSING(testing::TorchMissing());
  const std::string brown = testing::BrownDir();
  if (brown.empty()) GTEST_SKIP() << testing::BrownMissing();
  const std::string graph = NewTempDir("gpt");
  const std::vector<std::string> sizes = {"--vocab",  "512", "--hidden", "32",
                                          "--layers", "2",   "--heads",  "2",
                                          "--length", "32"};
  std::vector<std::string> exporter = {
      "/usr/bin/python3",
      Runfile("tests/torch_onnx_text_reference.py"),
      "--out",
      graph,
      "--model",
      "gpt",
      "--export-only",
      "--std",
      "0.02",
      "--seed",
      "5"};
  exporter.insert(exporter.end(), sizes.begin(), sizes.end());
  RunResult ref = RunProcess(exporter, graph, 180);
  ASSERT_EQ(ref.exit.exit_code, 0) << ref.err;
  testing::WriteStringToFile(
      graph + "/train.txt",
      ReadFileOrEmpty(brown + "/train.txt").substr(0, 300000));
  testing::WriteStringToFile(
      graph + "/valid.txt",
      ReadFileOrEmpty(brown + "/valid.txt").substr(0, 30000));
  const nlohmann::json job = {
      {"name", "ft"},
      {"seed", 3},
      {"model", {{"onnx", graph + "/model.onnx"}, {"input", {"token_ids"}}}},
      {"loss", "sparse_categorical_crossentropy"},
      {"optimizer", {{"type", "adam"}, {"learning_rate", 0.002}}},
      {"data",
       {{"format", "text"},
        {"task", "causal_lm"},
        {"train_path", graph + "/train.txt"},
        {"test_path", graph + "/valid.txt"},
        {"min_line_chars", 20},
        {"vocab_size", 512},
        {"sequence_length", 32}}},
      {"batch_size_per_replica", 8},
      {"steps", 100},
      {"checkpoint", {{"every_steps", 0}}},
      {"cluster", {{"workers", 2}, {"replicas_per_worker", 1}}}};
  const std::string batches = graph + "/batches";
  const nlohmann::json result = TrainWithBatches(job, graph, 2);
  ASSERT_TRUE(result.is_object());
  EXPECT_EQ(result["steps"], 100);
  EXPECT_EQ(result["global_batch_size"], 16);
  const std::string checkpoint = result["checkpoint"].get<std::string>();

  std::vector<std::string> peer = {"/usr/bin/python3",
                                   Runfile("tests/torch_gpt_steps.py"),
                                   "--init",
                                   graph + "/init.safetensors",
                                   "--batches",
                                   batches,
                                   "--steps",
                                   "100",
                                   "--lr",
                                   "0.002",
                                   "--lockstep",
                                   checkpoint + "/model.safetensors"};
  peer.insert(peer.end(), sizes.begin(), sizes.end());
  RunResult t = RunProcess(peer, graph, 600);
  ASSERT_EQ(t.exit.exit_code, 0) << t.err;
  const nlohmann::json got = nlohmann::json::parse(t.out, nullptr, false);
  ASSERT_TRUE(got.is_object()) << t.out;
  const double initial = got["initial"], theirs = got["torch"],
               ours = got["lockstep"];
  const double reported = result["test_loss"];
  std::printf(
      "causal LM, test loss: initial %.4f; after 100 steps torch %.4f, "
      "lockstep (2 workers) %.4f (its own evaluation %.4f)\n",
      initial, theirs, ours, reported);
  EXPECT_NEAR(ours, theirs, 0.02 * theirs);
  EXPECT_LT(theirs, initial - 0.5);
  EXPECT_LT(ours, initial - 0.5);
  EXPECT_NEAR(reported, ours, 1e-3 * ours);
}

}  // namespace
}  // namespace lockstep
