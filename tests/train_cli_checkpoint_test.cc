// `lockstep train` across runs: stop+resume, kill -9+resume and a damaged
// latest checkpoint end with the same parameters as an uninterrupted run;
// SIGTERM writes a checkpoint; a text job keeps its checkpoint's
// vocabulary, and `lockstep predict` fills masks from the checkpoint. The
// fixture is in train_cli_fixture.h.
#include "tests/train_cli_fixture.h"

#include <signal.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/subprocess.h"
#include "tests/test_jobs.h"

namespace lockstep {
namespace {

using testing::ReadFileOrEmpty;
using testing::RunProcess;
using testing::RunResult;
using testing::Subprocess;
using testing::TinyJob;
using testing::WriteStringToFile;
using train_cli_fixture::Binary;
using train_cli_fixture::Exists;
using train_cli_fixture::kTimeout;
using train_cli_fixture::TrainCliTest;

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

// A finished job run again has nothing to train: its result.json (train
// loss, speed) stays the one of the run that trained it, and the run says
// so instead of reporting 0 samples/s.
TEST_F(TrainCliTest, RunningAFinishedJobAgainKeepsItsResult) {
  const std::string path = WriteJob(TinyJob());
  const std::string storage = dir_ + "/storage";
  RunResult first = Train(path, storage);
  ASSERT_EQ(first.exit.exit_code, 0) << first.err;
  const std::string before =
      ReadFileOrEmpty(storage + "/jobs/tiny/result.json");
  ASSERT_GT(Result(storage, "tiny")["train_loss"].get<double>(), 0.0);
  RunResult again = Train(path, storage);
  ASSERT_EQ(again.exit.exit_code, 0) << again.err;
  EXPECT_NE(
      again.out.find("[tiny] had already finished at step 189: nothing "
                     "to train; " +
                     storage + "/jobs/tiny/result.json is left as it was"),
      std::string::npos)
      << again.out;
  EXPECT_EQ(again.out.find("0 samples/s"), std::string::npos) << again.out;
  EXPECT_EQ(ReadFileOrEmpty(storage + "/jobs/tiny/result.json"), before);
  // A result.json of other parameters (an interrupted --no-resume run left
  // the old one) is not kept: the run writes its own.
  nlohmann::json other = Result(storage, "tiny");
  const std::string fingerprint = other["fingerprint"];
  other["fingerprint"] = "00000000000000000000000000000000";
  WriteStringToFile(storage + "/jobs/tiny/result.json", other.dump());
  RunResult third = Train(path, storage);
  ASSERT_EQ(third.exit.exit_code, 0) << third.err;
  EXPECT_EQ(third.out.find("had already finished"), std::string::npos);
  EXPECT_EQ(Result(storage, "tiny")["fingerprint"], fingerprint);
}

TEST_F(TrainCliTest, KillDashNineThenResumeEqualsStraightRun) {
  nlohmann::json job =
      SlowJob({{"epochs", 1}, {"checkpoint", {{"every_steps", 250}}}});
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

}  // namespace
}  // namespace lockstep
