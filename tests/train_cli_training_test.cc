// `lockstep train` as a user runs it: a real process on a small synthetic
// job. Checks the progress line, result.json, checkpoints and summaries
// (TensorBoard event files that verify), that the fingerprint follows the
// seed, and that a sigmoid head and a batch-norm base with a frozen
// fine-tune learn. The fixture is in train_cli_fixture.h.
#include "tests/train_cli_fixture.h"

#include <dirent.h>

#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "core/summary/event_file_reader.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"
#include "tests/test_jobs.h"
#include "tests/torch_util.h"

namespace lockstep {
namespace {

using testing::ReadFileOrEmpty;
using testing::Runfile;
using testing::RunResult;
using testing::TinyJob;
using train_cli_fixture::Exists;
using train_cli_fixture::TrainCliTest;

TEST_F(TrainCliTest, TrainsShowsProgressAndWritesResults) {
  const std::string storage = dir_ + "/storage";
  RunResult r = Train(WriteJob(TinyJob()), storage);
  ASSERT_TRUE(r.exit.exited);
  ASSERT_EQ(r.exit.exit_code, 0) << r.out << r.err;
  // 1000 samples / 16 = 63 steps per epoch (the last one short), 3 epochs.
  std::regex line(
      R"(\[tiny\] epoch [1-3]/3  step \d+/189  loss \d+\.\d{4}  acc \d\.\d{4}  lr \d\.\de[-+]\d\d  [\d,]+ samples/s  ETA \d+:\d\d:\d\d)");
  EXPECT_TRUE(std::regex_search(r.out, line)) << r.out;
  EXPECT_NE(r.out.find("epoch 3 done"), std::string::npos) << r.out;

  nlohmann::json res = Result(storage, "tiny");
  ASSERT_TRUE(res.is_object()) << r.out;
  for (const char* key :
       {"test_accuracy", "test_loss", "train_loss", "steps", "epochs",
        "samples_per_sec", "wall_seconds", "fingerprint"}) {
    EXPECT_TRUE(res.contains(key)) << key;
  }
  EXPECT_EQ(res["steps"], 189);
  EXPECT_EQ(res["epochs"], 3);
  EXPECT_GT(res["test_accuracy"].get<double>(), 0.5);  // chance is 0.1
  EXPECT_GT(res["samples_per_sec"].get<double>(), 0.0);
  EXPECT_EQ(res["fingerprint"].get<std::string>().size(), 32u);

  const std::string ckpt = storage + "/jobs/tiny/checkpoints";
  EXPECT_EQ(ReadFileOrEmpty(ckpt + "/latest"), "step-00000189\n");
  for (const char* f :
       {"model.safetensors", "optimizer.safetensors", "state.json"}) {
    EXPECT_TRUE(Exists(ckpt + "/step-00000189/" + f)) << f;
  }
  // keep = 3: older checkpoints were pruned.
  EXPECT_FALSE(Exists(ckpt + "/step-00000020"));
  EXPECT_TRUE(Exists(storage + "/jobs/tiny/summaries"));
}

// The seed's fine-tuning head on a two-class task: convolution, global
// average pooling, one sigmoid unit, binary cross-entropy from its logit.
TEST_F(TrainCliTest, SigmoidHeadWithBinaryCrossentropyLearns) {
  const std::string storage = dir_ + "/storage";
  nlohmann::json job = TinyJob(nlohmann::json::parse(R"({
    "name": "binary", "epochs": 6, "loss": "binary_crossentropy",
    "data": {"num_classes": 2},
    "model": {"input_shape": [8, 8, 1], "layers": [
      {"type": "conv2d", "filters": 16, "kernel_size": 3,
       "padding": "same", "activation": "relu6"},
      {"type": "global_average_pooling2d"},
      {"type": "dense", "units": 32, "activation": "relu"},
      {"type": "dense", "units": 1, "activation": "sigmoid"}]}})"));
  RunResult r = Train(WriteJob(job), storage);
  ASSERT_TRUE(r.exit.exited);
  ASSERT_EQ(r.exit.exit_code, 0) << r.out << r.err;
  nlohmann::json res = Result(storage, "binary");
  ASSERT_TRUE(res.is_object()) << r.out;
  // Chance is 0.5; the loss is a mean binary cross-entropy (log 2 = 0.693
  // at chance).
  EXPECT_GT(res["test_accuracy"].get<double>(), 0.8) << r.out;
  EXPECT_LT(res["test_loss"].get<double>(), 0.5) << r.out;
}

// The seed's two phases with batch norm: train a conv + batch norm base
// (two local replicas, so the running statistics are averaged over them),
// then freeze it and train a new head from its checkpoint. A stop and
// resume of phase 1 ends with the same bytes, running statistics included;
// phase 2 leaves every frozen tensor (weights and running statistics)
// byte-identical and keeps no optimizer state for them.
TEST_F(TrainCliTest, BatchNormBaseThenFrozenFineTune) {
  const nlohmann::json base = nlohmann::json::parse(R"([
      {"type": "conv2d", "name": "conv", "filters": 16, "kernel_size": 3,
       "padding": 1, "use_bias": false},
      {"type": "batch_norm", "name": "bn", "momentum": 0.9,
       "activation": "relu6"},
      {"type": "flatten", "name": "flat"}])");
  nlohmann::json phase1 = TinyJob(nlohmann::json::parse(R"({
    "name": "base", "epochs": 4,
    "cluster": {"replicas_per_worker": 2}})"));
  phase1["model"] = {{"input_shape", {8, 8, 1}}, {"layers", base}};
  phase1["model"]["layers"].push_back(
      {{"type", "dense"}, {"name", "head"}, {"units", 10}});
  const std::string path1 = WriteJob(phase1, "base.json");
  const std::string storage = dir_ + "/storage";
  RunResult r1 = Train(path1, storage);
  ASSERT_EQ(r1.exit.exit_code, 0) << r1.out << r1.err;
  nlohmann::json res1 = Result(storage, "base");
  ASSERT_TRUE(res1.is_object()) << r1.out;
  EXPECT_GT(res1["test_accuracy"].get<double>(), 0.5) << r1.out;  // 0.1
  // Stopped and resumed: the same bytes as straight through.
  const std::string resumed = dir_ + "/resumed";
  ASSERT_EQ(Train(path1, resumed, {"--stop-after-steps", "100"}).exit.exit_code,
            0);
  RunResult again = Train(path1, resumed);
  ASSERT_EQ(again.exit.exit_code, 0) << again.err;
  EXPECT_EQ(Result(resumed, "base")["fingerprint"], res1["fingerprint"]);

  // 1000 samples in global batches of 32: 32 steps an epoch.
  EXPECT_EQ(res1["steps"], 128);
  const std::string ckpt1 = storage + "/jobs/base/checkpoints/step-00000128";
  std::map<std::string, Tensor> trained =
      testing::ReadTensors(ckpt1 + "/model.safetensors");
  ASSERT_EQ(trained.count("bn/moving_variance"), 1u);
  // The running statistics moved from their start (0 and 1).
  EXPECT_NE(trained.at("bn/moving_mean").values(),
            std::vector<float>(16, 0.0f));
  EXPECT_NE(trained.at("bn/moving_variance").values(),
            std::vector<float>(16, 1.0f));

  nlohmann::json phase2 = TinyJob(nlohmann::json::parse(R"({
    "name": "finetune", "epochs": 2, "loss": "binary_crossentropy",
    "data": {"num_classes": 2},
    "cluster": {"replicas_per_worker": 2}})"));
  nlohmann::json frozen = base;
  for (nlohmann::json& l : frozen) l["trainable"] = false;
  frozen.push_back({{"type", "dense"}, {"name", "fc"}, {"units", 32},
                    {"activation", "relu"}});
  frozen.push_back({{"type", "dropout"}, {"rate", 0.5}});
  frozen.push_back({{"type", "dense"}, {"name", "out"}, {"units", 1},
                    {"activation", "sigmoid"}});
  phase2["model"] = {{"input_shape", {8, 8, 1}},
                     {"layers", frozen},
                     {"init",
                      {{"safetensors", ckpt1 + "/model.safetensors"},
                       {"allow_missing", true}}}};
  RunResult r2 = Train(WriteJob(phase2, "finetune.json"), storage);
  ASSERT_EQ(r2.exit.exit_code, 0) << r2.out << r2.err;
  EXPECT_NE(r2.out.find("initial weights: 5 of 9 parameter tensors from " +
                        ckpt1 + "/model.safetensors; initialized by their "
                        "layers: fc/kernel, fc/bias, out/kernel, out/bias; "
                        "not in the model: head/bias, head/kernel"),
            std::string::npos)
      << r2.out;
  nlohmann::json res2 = Result(storage, "finetune");
  ASSERT_TRUE(res2.is_object()) << r2.out;
  EXPECT_GT(res2["test_accuracy"].get<double>(), 0.6) << r2.out;  // 0.5
  const std::string ckpt2 =
      storage + "/jobs/finetune/checkpoints/step-00000064";
  std::map<std::string, Tensor> tuned =
      testing::ReadTensors(ckpt2 + "/model.safetensors");
  for (const char* name : {"conv/kernel", "bn/gamma", "bn/beta",
                           "bn/moving_mean", "bn/moving_variance"}) {
    ASSERT_EQ(tuned.count(name), 1u) << name;
    EXPECT_EQ(tuned.at(name).values(), trained.at(name).values()) << name;
  }
  // No optimizer state for the frozen tensors; the head has its own.
  std::map<std::string, Tensor> slots =
      testing::ReadTensors(ckpt2 + "/optimizer.safetensors");
  for (const auto& [name, t] : slots) {
    EXPECT_EQ(name.find("conv/"), std::string::npos) << name;
    EXPECT_EQ(name.find("bn/"), std::string::npos) << name;
  }
  EXPECT_GT(slots.size(), 0u);

  // The second phase: the same job, the base trainable again, a lower
  // learning rate, one more epoch. It resumes from the fine-tune's last
  // checkpoint; the base's optimizer state starts at zero and it learns.
  nlohmann::json phase3 = phase2;
  for (nlohmann::json& l : phase3["model"]["layers"]) l.erase("trainable");
  phase3["epochs"] = 3;
  phase3["optimizer"]["learning_rate"] = 0.0003;
  RunResult r3 = Train(WriteJob(phase3, "unfrozen.json"), storage);
  ASSERT_EQ(r3.exit.exit_code, 0) << r3.out << r3.err;
  EXPECT_NE(r3.out.find("resumed from " + ckpt2), std::string::npos) << r3.out;
  EXPECT_NE(r3.out.find("optimizer state starts at zero for 3 parameters the "
                        "checkpoint has none for (frozen when it was "
                        "written?): bn/beta, bn/gamma, conv/kernel"),
            std::string::npos)
      << r3.out;
  std::map<std::string, Tensor> unfrozen = testing::ReadTensors(
      storage + "/jobs/finetune/checkpoints/step-00000096/model.safetensors");
  ASSERT_EQ(unfrozen.count("conv/kernel"), 1u);
  EXPECT_NE(unfrozen.at("conv/kernel").values(),
            trained.at("conv/kernel").values());
  EXPECT_GT(Result(storage, "finetune")["test_accuracy"].get<double>(), 0.6);
}

TEST_F(TrainCliTest, SameSeedSameFingerprint) {
  RunResult a = Train(WriteJob(TinyJob({{"epochs", 1}})), dir_ + "/a");
  RunResult b = Train(WriteJob(TinyJob({{"epochs", 1}})), dir_ + "/b");
  ASSERT_EQ(a.exit.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit.exit_code, 0) << b.err;
  EXPECT_EQ(Result(dir_ + "/a", "tiny")["fingerprint"],
            Result(dir_ + "/b", "tiny")["fingerprint"]);
  RunResult c =
      Train(WriteJob(TinyJob({{"epochs", 1}, {"seed", 8}})), dir_ + "/c");
  ASSERT_EQ(c.exit.exit_code, 0) << c.err;
  EXPECT_NE(Result(dir_ + "/a", "tiny")["fingerprint"],
            Result(dir_ + "/c", "tiny")["fingerprint"]);
}

TEST_F(TrainCliTest, SummariesAreValidTensorBoardEventFiles) {
  const std::string storage = dir_ + "/storage";
  RunResult r = Train(WriteJob(TinyJob()), storage);
  ASSERT_EQ(r.exit.exit_code, 0) << r.err;
  const std::string summaries = storage + "/jobs/tiny/summaries";
  std::vector<std::string> files;
  DIR* d = opendir(summaries.c_str());
  ASSERT_NE(d, nullptr);
  while (dirent* e = readdir(d)) {
    if (std::string(e->d_name).rfind("events.out.tfevents.", 0) == 0) {
      files.push_back(summaries + "/" + e->d_name);
    }
  }
  closedir(d);
  ASSERT_EQ(files.size(), 1u);
  // Every record's two masked CRC32Cs are verified by the reader.
  absl::StatusOr<EventFile> events = ReadEventFile(files[0]);
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_EQ(events->file_version, "brain.Event:2");
  std::map<std::string, std::vector<int64_t>> steps;
  std::map<std::string, double> last;
  for (const ScalarEvent& e : events->scalars) {
    steps[e.tag].push_back(e.step);
    last[e.tag] = e.value;
  }
  EXPECT_EQ(steps["train/loss"].size(), 18u);  // every 10 of 189 steps
  EXPECT_EQ(steps["train/loss"].front(), 10);
  EXPECT_EQ(steps["eval/accuracy"], (std::vector<int64_t>{63, 126, 189}));
  for (const char* tag :
       {"train/accuracy", "learning_rate", "samples_per_sec", "eval/loss"}) {
    EXPECT_FALSE(steps[tag].empty()) << tag;
  }
  nlohmann::json res = Result(storage, "tiny");
  EXPECT_NEAR(last["eval/accuracy"], res["test_accuracy"].get<double>(), 1e-6);
  EXPECT_NEAR(last["learning_rate"], 0.003, 1e-9);
}

// The shipped default job (its first epoch of five: the suite's time).
TEST_F(TrainCliTest, DefaultExampleLearnsWellAboveChance) {
  const std::string storage = dir_ + "/storage";
  nlohmann::json job = nlohmann::json::parse(
      testing::ReadFileOrEmpty(Runfile("examples/default.json")));
  ASSERT_TRUE(job.is_object());
  job["epochs"] = 1;
  RunResult r = Train(WriteJob(job), storage);
  ASSERT_EQ(r.exit.exit_code, 0) << r.out << r.err;
  nlohmann::json res = Result(storage, "default");
  ASSERT_TRUE(res.is_object());
  EXPECT_EQ(res["replicas"], 2);
  EXPECT_EQ(res["global_batch_size"], 128);            // 2 replicas x 64
  EXPECT_GE(res["test_accuracy"].get<double>(), 0.8);  // chance: 0.1
}

}  // namespace
}  // namespace lockstep
