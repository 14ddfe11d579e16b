// `lockstep train` as a user runs it: a real process on a small synthetic
// job. Checks the progress line, result.json, checkpoints and summaries;
// that stop+resume and kill -9+resume end with the same parameters as an
// uninterrupted run; and that every kind of bad input fails cleanly.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>

#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "core/summary/event_file_reader.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"
#include "tests/test_jobs.h"
#include "tests/torch_util.h"

namespace lockstep {
namespace {

using testing::NewTempDir;
using testing::ReadFileOrEmpty;
using testing::Runfile;
using testing::RunProcess;
using testing::RunResult;
using testing::Subprocess;
using testing::TinyJob;
using testing::WriteStringToFile;

constexpr double kTimeout = 120;

std::string Binary() { return Runfile("client/lockstep"); }

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// A job slow enough (seconds) to be signalled mid-run.
nlohmann::json SlowJob(const nlohmann::json& extra) {
  nlohmann::json job = TinyJob(nlohmann::json::parse(R"({
    "model": {"input_shape": [8, 8, 1], "layers": [
      {"type": "flatten"},
      {"type": "dense", "units": 512, "activation": "relu"},
      {"type": "dense", "units": 512, "activation": "relu"},
      {"type": "dense", "units": 10}]},
    "data": {"train_samples": 20000}})"));
  if (!extra.is_null()) job.merge_patch(extra);
  return job;
}

class TrainCliTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = NewTempDir("train_cli"); }

  std::string WriteJob(const nlohmann::json& job,
                       const std::string& file = "job.json") {
    std::string path = dir_ + "/" + file;
    WriteStringToFile(path, job.dump(2));
    return path;
  }

  RunResult Train(const std::string& job_path, const std::string& storage,
                  std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {
        Binary(), "train", job_path, "--storage", storage, "--threads", "1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunProcess(argv, dir_, kTimeout);
  }

  nlohmann::json Result(const std::string& storage, const std::string& name) {
    std::string text =
        ReadFileOrEmpty(storage + "/jobs/" + name + "/result.json");
    return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  }

  std::string dir_;
};

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

TEST_F(TrainCliTest, StopAndResumeEqualsStraightRun) {
  // Two local replicas, so the resumed run also exercises the replica sum.
  nlohmann::json job = TinyJob({{"cluster", {{"replicas_per_worker", 2}}}});
  const std::string path = WriteJob(job);
  RunResult straight = Train(path, dir_ + "/straight");
  ASSERT_EQ(straight.exit.exit_code, 0) << straight.err;

  const std::string storage = dir_ + "/resumed";
  RunResult first = Train(path, storage, {"--stop-after-steps", "45"});
  ASSERT_EQ(first.exit.exit_code, 0) << first.err;
  EXPECT_NE(first.out.find("stopped at step 45 of 96"), std::string::npos)
      << first.out;
  EXPECT_FALSE(Exists(storage + "/jobs/tiny/result.json"));
  RunResult second = Train(path, storage);
  ASSERT_EQ(second.exit.exit_code, 0) << second.err;
  EXPECT_NE(second.out.find("resumed from"), std::string::npos);
  EXPECT_NE(second.out.find("at step 45"), std::string::npos) << second.out;
  EXPECT_EQ(Result(storage, "tiny")["fingerprint"],
            Result(dir_ + "/straight", "tiny")["fingerprint"]);
  EXPECT_EQ(Result(storage, "tiny")["resumed_from_step"], 45);
}

TEST_F(TrainCliTest, KillDashNineThenResumeEqualsStraightRun) {
  nlohmann::json job =
      SlowJob({{"epochs", 2}, {"checkpoint", {{"every_steps", 250}}}});
  const std::string path = WriteJob(job);
  RunResult straight = Train(path, dir_ + "/straight");
  ASSERT_EQ(straight.exit.exit_code, 0) << straight.err;

  const std::string storage = dir_ + "/killed";
  {
    Subprocess p(
        {Binary(), "train", path, "--storage", storage, "--threads", "1"},
        dir_);
    ASSERT_TRUE(p.WaitForOutput("step-00000250 written", kTimeout))
        << p.Stdout() << p.Stderr();
    p.Signal(SIGKILL);
    testing::ExitInfo e = p.Wait(10);
    ASSERT_TRUE(e.exited);
    EXPECT_EQ(e.term_signal, SIGKILL);
  }
  EXPECT_FALSE(Exists(storage + "/jobs/tiny/result.json"));
  RunResult again = Train(path, storage);
  ASSERT_EQ(again.exit.exit_code, 0) << again.out << again.err;
  EXPECT_NE(again.out.find("resumed from"), std::string::npos) << again.out;
  EXPECT_EQ(Result(storage, "tiny")["fingerprint"],
            Result(dir_ + "/straight", "tiny")["fingerprint"]);
}

// A tiny BERT on four sentences it can learn by heart.
nlohmann::json TextJob(const std::string& text_file) {
  return nlohmann::json::parse(R"({"name": "txt", "seed": 3,
    "model": {"preset": "bert_mlm", "vocab_size": 128, "hidden": 32,
              "layers": 1, "heads": 2, "intermediate": 64,
              "max_positions": 16, "dropout": 0.0},
    "optimizer": {"type": "adamw", "learning_rate": 0.005},
    "data": {"format": "text", "train_path": ")" + text_file +
                               R"(", "test_path": ")" + text_file + R"(",
             "min_line_chars": 1, "vocab_size": 128, "sequence_length": 12,
             "pack_lines": false, "max_predictions": 2},
    "batch_size_per_replica": 16, "epochs": 40,
    "checkpoint": {"every_steps": 0, "keep": 2},
    "summary": {"every_steps": 1000}})");
}

std::string Sentences(int copies) {
  std::string text;
  for (int i = 0; i < copies; ++i) {
    text += "the cat sat on the mat\na dog ran in the park\n"
            "my bird flew over the house\nhis fish swam under the boat\n";
  }
  return text;
}

TEST_F(TrainCliTest, ResumedTextJobKeepsTheVocabularyOfItsCheckpoint) {
  const std::string text = dir_ + "/train.txt";
  WriteStringToFile(text, Sentences(50));
  const std::string path = WriteJob(TextJob(text));
  const std::string storage = dir_ + "/s";
  RunResult first = Train(path, storage, {"--stop-after-steps", "100"});
  ASSERT_EQ(first.exit.exit_code, 0) << first.out << first.err;
  const std::string ckpts = storage + "/jobs/txt/checkpoints/";
  const std::string vocab = ReadFileOrEmpty(ckpts + "step-00000100/vocab.txt");
  ASSERT_EQ(vocab.rfind("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", 0), 0u)
      << vocab;
  EXPECT_NE(vocab.find("\nsat\n"), std::string::npos) << vocab;

  // The training file changes under the job (new words would change a
  // learned vocabulary): the resumed run still indexes the embedding rows
  // with the checkpoint's vocabulary.
  std::string changed = Sentences(50);
  for (int i = 0; i < 40; ++i) {
    changed += "zebras quickly jumped over seven lazy wolves\n";
  }
  WriteStringToFile(text, changed);
  RunResult resumed = Train(path, storage);
  ASSERT_EQ(resumed.exit.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_NE(resumed.out.find("at step 100"), std::string::npos)
      << resumed.out;
  std::string latest = ReadFileOrEmpty(ckpts + "latest");
  ASSERT_FALSE(latest.empty());
  latest.pop_back();
  EXPECT_NE(latest, "step-00000100");
  EXPECT_EQ(ReadFileOrEmpty(ckpts + latest + "/vocab.txt"), vocab);

  // A fresh run on the changed file learns another vocabulary.
  RunResult fresh = Train(path, dir_ + "/fresh", {"--stop-after-steps", "1"});
  ASSERT_EQ(fresh.exit.exit_code, 0) << fresh.out << fresh.err;
  const std::string other = ReadFileOrEmpty(
      dir_ + "/fresh/jobs/txt/checkpoints/step-00000001/vocab.txt");
  EXPECT_FALSE(other.empty());
  EXPECT_NE(other, vocab);
}

TEST_F(TrainCliTest, PredictFillsTheMasksOfATrainedTextModel) {
  const std::string text = dir_ + "/train.txt";
  WriteStringToFile(text, Sentences(50));
  const std::string path = WriteJob(TextJob(text));
  const std::string storage = dir_ + "/s";
  auto predict = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = {Binary(), "predict", path, "--storage",
                                     storage};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunProcess(argv, dir_, kTimeout);
  };
  RunResult none = predict({"--text", "the cat [MASK] on the mat"});
  EXPECT_EQ(none.exit.exit_code, 2);
  EXPECT_NE(none.err.find("no checkpoint in"), std::string::npos) << none.err;

  RunResult trained = Train(path, storage);
  ASSERT_EQ(trained.exit.exit_code, 0) << trained.out << trained.err;
  RunResult r = predict({"--text", "the cat [MASK] on the [MASK]", "--top-k",
                         "2"});
  ASSERT_EQ(r.exit.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("tokens: [CLS] the cat [MASK] on the [MASK] [SEP]"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("vocabulary " + storage +
                       "/jobs/txt/checkpoints/step-00000520/vocab.txt"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex(R"(\[MASK\] 1 of 2 \(token 3\):\n   1\. sat +0\.\d{4}\n   2\. \S+ +0\.\d{4}\n)")))
      << r.out;
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex(R"(\[MASK\] 2 of 2 \(token 6\):\n   1\. mat +0\.\d{4}\n)")))
      << r.out;

  RunResult no_mask = predict({"--text", "the cat sat on the mat"});
  EXPECT_EQ(no_mask.exit.exit_code, 2);
  EXPECT_NE(no_mask.err.find("the text has no [MASK] to fill"),
            std::string::npos)
      << no_mask.err;
  RunResult bad_k = predict({"--text", "the [MASK]", "--top-k", "0"});
  EXPECT_EQ(bad_k.exit.exit_code, 2);
  EXPECT_NE(bad_k.err.find("--top-k: must be at least 1, got 0"),
            std::string::npos)
      << bad_k.err;
  RunResult no_text = predict({});
  EXPECT_EQ(no_text.exit.exit_code, 2);
  EXPECT_NE(no_text.err.find("expected one job file and --text or --image"),
            std::string::npos)
      << no_text.err;
  RunResult image = predict({"--image", path});
  EXPECT_EQ(image.exit.exit_code, 2);
  EXPECT_NE(image.err.find("does not classify images (data.format is not "
                           "\"image_folder\")"),
            std::string::npos)
      << image.err;
}

TEST_F(TrainCliTest, SigtermCheckpointsAndExits) {
  const std::string path =
      WriteJob(SlowJob({{"epochs", 20}, {"checkpoint", {{"every_steps", 0}}}}));
  const std::string storage = dir_ + "/s";
  Subprocess p(
      {Binary(), "train", path, "--storage", storage, "--threads", "1"}, dir_);
  ASSERT_TRUE(p.WaitForOutput("epoch 1 done", kTimeout)) << p.Stderr();
  p.Signal(SIGTERM);
  testing::ExitInfo e = p.Wait(30);
  ASSERT_TRUE(e.exited);
  EXPECT_EQ(e.exit_code, 128 + SIGTERM) << p.Stdout() << p.Stderr();
  EXPECT_NE(p.Stdout().find("run again to resume"), std::string::npos);
  std::string latest =
      ReadFileOrEmpty(storage + "/jobs/tiny/checkpoints/latest");
  EXPECT_EQ(latest.rfind("step-", 0), 0u) << latest;
}

TEST_F(TrainCliTest, DamagedLatestCheckpointFallsBackToPrevious) {
  const std::string path = WriteJob(TinyJob({{"epochs", 2}}));
  const std::string storage = dir_ + "/s";
  RunResult first = Train(path, storage, {"--stop-after-steps", "40"});
  ASSERT_EQ(first.exit.exit_code, 0) << first.err;
  const std::string model =
      storage + "/jobs/tiny/checkpoints/step-00000040/model.safetensors";
  std::string bytes = ReadFileOrEmpty(model);
  ASSERT_GT(bytes.size(), 100u);
  bytes[bytes.size() - 5] ^= 0x10;  // one flipped bit in the last tensor
  WriteStringToFile(model, bytes);
  RunResult second = Train(path, storage);
  ASSERT_EQ(second.exit.exit_code, 0) << second.out << second.err;
  EXPECT_NE(second.out.find("step-00000040 is damaged"), std::string::npos)
      << second.out;
  EXPECT_NE(second.out.find("at step 20"), std::string::npos) << second.out;
  RunResult straight = Train(path, dir_ + "/straight");
  EXPECT_EQ(Result(storage, "tiny")["fingerprint"],
            Result(dir_ + "/straight", "tiny")["fingerprint"]);
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

TEST_F(TrainCliTest, DefaultExampleLearnsWellAboveChance) {
  const std::string storage = dir_ + "/storage";
  RunResult r = Train(Runfile("examples/default.json"), storage);
  ASSERT_EQ(r.exit.exit_code, 0) << r.out << r.err;
  nlohmann::json res = Result(storage, "default");
  ASSERT_TRUE(res.is_object());
  EXPECT_EQ(res["replicas"], 2);
  EXPECT_EQ(res["global_batch_size"], 128);            // 2 replicas x 64
  EXPECT_GE(res["test_accuracy"].get<double>(), 0.8);  // chance: 0.1
}

// ---- Bad input: a clear message naming the file or field, a non-zero
// exit, and nothing written to the storage folder.

class BadInputTest : public TrainCliTest {
 protected:
  void ExpectRejected(const std::string& job_path, const std::string& needle,
                      int exit_code = 2) {
    const std::string storage = dir_ + "/storage";
    RunResult r = Train(job_path, storage);
    ASSERT_TRUE(r.exit.exited) << "hung";
    EXPECT_EQ(r.exit.term_signal, 0) << "crashed: " << r.err;
    EXPECT_EQ(r.exit.exit_code, exit_code) << r.out << r.err;
    EXPECT_NE(r.err.find("lockstep train: error: "), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_FALSE(Exists(storage + "/jobs")) << "half-written output";
  }

  // Writes an IDX file: magic, dims, then `payload`.
  std::string WriteIdx(const std::string& name, uint32_t magic,
                       std::vector<uint32_t> dims, const std::string& payload) {
    std::string b;
    auto be32 = [&](uint32_t v) {
      for (int s = 24; s >= 0; s -= 8) b.push_back(char((v >> s) & 0xff));
    };
    be32(magic);
    for (uint32_t d : dims) be32(d);
    b += payload;
    std::string path = dir_ + "/" + name;
    WriteStringToFile(path, b);
    return path;
  }

  nlohmann::json IdxJob(const std::string& train_images,
                        const std::string& train_labels) {
    nlohmann::json job = TinyJob();
    job["model"]["input_shape"] = {4, 4, 1};
    job["data"] = {
        {"format", "mnist_idx"},        {"train_images", train_images},
        {"train_labels", train_labels}, {"test_images", train_images},
        {"test_labels", train_labels},  {"scale", 255}};
    return job;
  }
};

TEST_F(BadInputTest, MalformedJson) {
  const std::string path = dir_ + "/bad.json";
  WriteStringToFile(path, "{\n  \"name\": \"x\",\n  \"seed\": ,\n}");
  ExpectRejected(path, "bad.json: malformed JSON at line 3");
}

TEST_F(BadInputTest, MissingJobFile) {
  ExpectRejected(dir_ + "/nope.json", "No such file or directory");
}

TEST_F(BadInputTest, UnknownLayerType) {
  nlohmann::json job = TinyJob();
  job["model"]["layers"][1]["type"] = "dense3";
  ExpectRejected(WriteJob(job),
                 "model.layers[1].type: unknown layer type \"dense3\"");
}

TEST_F(BadInputTest, DenseAfterConvWithoutFlatten) {
  nlohmann::json job = TinyJob();
  job["model"]["layers"] = nlohmann::json::parse(R"([
      {"type": "conv2d", "filters": 4, "kernel_size": 3},
      {"type": "dense", "units": 10}])");
  // Dense applies to the last axis (as Keras): the output [6, 6, 10] does
  // not fit 10 classes, and the message says where the flatten goes.
  ExpectRejected(WriteJob(job),
                 "model: the model outputs [6, 6, 10] per sample but the data "
                 "has 10 classes (data.num_classes); the last layer needs 10 "
                 "units, after a flatten layer");
}

TEST_F(BadInputTest, BinaryCrossentropyNeedsTwoClassesAndOneOutput) {
  nlohmann::json job = TinyJob({{"loss", "binary_crossentropy"}});
  ExpectRejected(WriteJob(job),
                 "loss: binary_crossentropy needs two classes (labels 0 and "
                 "1), one per sample; the data (synthetic(seed=3, n=1000, "
                 "train)) has 1 label(s) of 10 classes per sample");
  job["data"]["num_classes"] = 2;
  job["model"]["layers"].back()["units"] = 2;
  ExpectRejected(WriteJob(job),
                 "model: binary_crossentropy reads one logit per sample (a "
                 "last dense layer of 1 unit, linear or sigmoid), but the "
                 "model outputs [2] per sample");
}

TEST_F(BadInputTest, NegativeLearningRate) {
  ExpectRejected(WriteJob(TinyJob({{"optimizer", {{"learning_rate", -1}}}})),
                 "optimizer.learning_rate: must be > 0, got -1");
}

TEST_F(BadInputTest, MissingDatasetFile) {
  ExpectRejected(WriteJob(IdxJob(dir_ + "/none-images", dir_ + "/none-labels")),
                 "data.train_images: cannot open \"" + dir_ + "/none-images\"");
}

TEST_F(BadInputTest, TruncatedIdxFile) {
  std::string images =
      WriteIdx("img", 0x803, {10, 4, 4}, std::string(100, 'a'));
  std::string labels = WriteIdx("lab", 0x801, {10}, std::string(10, '\1'));
  ExpectRejected(WriteJob(IdxJob(images, labels)), "truncated");
}

TEST_F(BadInputTest, LabelCountDiffersFromImageCount) {
  std::string images =
      WriteIdx("img", 0x803, {10, 4, 4}, std::string(160, 'a'));
  std::string labels = WriteIdx("lab", 0x801, {9}, std::string(9, '\1'));
  ExpectRejected(WriteJob(IdxJob(images, labels)), "has 9 labels");
}

TEST_F(BadInputTest, LabelOutOfRange) {
  std::string images =
      WriteIdx("img", 0x803, {10, 4, 4}, std::string(160, 'a'));
  std::string payload(10, '\1');
  payload[7] = 12;
  std::string labels = WriteIdx("lab", 0x801, {10}, payload);
  ExpectRejected(WriteJob(IdxJob(images, labels)),
                 "label 12 at index 7 is out of range [0, 10)");
}

TEST_F(BadInputTest, StorageThatCannotBeWritten) {
  const std::string file = dir_ + "/a-file";
  WriteStringToFile(file, "x");
  RunResult r = Train(WriteJob(TinyJob()), file + "/storage");
  ASSERT_TRUE(r.exit.exited);
  EXPECT_EQ(r.exit.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--storage: cannot create \"" + file + "\""),
            std::string::npos)
      << r.err;
}

TEST_F(BadInputTest, UnknownFlagAndMissingJob) {
  RunResult r =
      RunProcess({Binary(), "train", "--storag", "x"}, dir_, kTimeout);
  EXPECT_EQ(r.exit.exit_code, 2);
  EXPECT_NE(r.err.find("unknown flag --storag"), std::string::npos) << r.err;
  r = RunProcess({Binary(), "frobnicate"}, dir_, kTimeout);
  EXPECT_EQ(r.exit.exit_code, 2);
  EXPECT_NE(r.err.find("unknown command \"frobnicate\""), std::string::npos);
}

}  // namespace
}  // namespace lockstep
