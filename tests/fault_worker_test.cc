// Fault injection on a worker of a real local cluster (DESIGN "Failure and
// rejoin"): kill -9 a worker (of a convolutional job, a BERT masked-LM job,
// one with sync batch norm and a torch model brought as ONNX) and start
// another, SIGTERM one or both workers (a node drain), and SIGSTOP a worker
// (then SIGCONT). Each test asserts the job's outcome, the reason the
// coordinator reports and that the final parameters are byte-identical to
// an uninterrupted run of the same job (`lockstep train` with the same two
// replicas: for two ranks the ring sum is the local sum). The fixture is in
// fault_fixture.h.
#include "tests/fault_fixture.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "gtest/gtest.h"
#include "tests/subprocess.h"
#include "tests/torch_util.h"

namespace lockstep {
namespace {

using fault_fixture::Clock;
using fault_fixture::FaultJob;
using fault_fixture::FaultTest;
using fault_fixture::Since;
using testing::NewTempDir;
using testing::ReadFileOrEmpty;
using testing::RunResult;
using testing::Subprocess;
using testing::WriteStringToFile;

TEST_F(FaultTest, KilledWorkerIsReplacedAndTheRunEndsWithTheSameBytes) {
  const std::string reference = ReferenceFingerprint();
  Start();
  // With the sample audit on: the same bytes as the reference without it.
  ASSERT_EQ(Client({"submit", WriteJob(fault_fixture::Audited(FaultJob()))})
                .exit.exit_code,
            0);
  WaitForStep(120);
  Subprocess* survivor = RankProcess(0);
  Subprocess* victim = RankProcess(1);
  ASSERT_NE(victim, nullptr);
  ASSERT_NE(survivor, nullptr);
  const pid_t pid = victim->pid();
  victim->Signal(SIGKILL);
  const Clock::time_point killed = Clock::now();
  std::string last;
  ASSERT_TRUE(WaitForStatus("RECOVERING", 10, &last)) << last;
  const double detection = Since(killed);
  // A broken stream is detected at once (goal: within 3 s).
  EXPECT_LT(detection, testing::Scaled(3.0)) << last;
  EXPECT_TRUE(std::regex_search(
      last, std::regex("rank 1 \\(w\\d on \\S+ pid " + std::to_string(pid) +
                       ", 127\\.0\\.0\\.1:\\d+\\) lost: rank 0 reports: ")))
      << last;
  // A replacement (a new process) registers and takes the free rank.
  std::string why;
  ASSERT_TRUE(cluster_->StartWorkers(1, 1, 1, &why)) << why;
  RunResult w = WatchToEnd();
  EXPECT_EQ(w.exit.exit_code, 0) << w.out << w.err;
  EXPECT_TRUE(std::regex_search(
      w.out,
      std::regex(R"(RECOVERING from generation 1: rank 1 )")))
      << w.out;
  // Generation 2 starts from the step the survivor kept in memory, not
  // from the checkpoint before it: only the step the kill broke is redone.
  // When the kill breaks the step right after a checkpoint (1 run in 50:
  // checkpoints every 50 steps), memory and checkpoint are the same step
  // and the coordinator says so instead.
  std::smatch m;
  int resumed = -1;
  if (std::regex_search(
          w.out, m,
          std::regex(R"(RUNNING generation 2 from step (\d+) \(rank 0's )"
                     R"(memory; the latest checkpoint is step (\d+)\) )"
                     R"(\(restart 1 of 3, )"))) {
    resumed = std::stoi(m[1]);
    const int checkpoint = std::stoi(m[2]);
    EXPECT_GT(resumed, checkpoint);
    EXPECT_EQ(checkpoint % 50, 0);
    const std::string kept = "kept the training state of step " +
                             std::to_string(resumed) + " in memory";
    EXPECT_TRUE(survivor->Stdout().find(kept) != std::string::npos ||
                survivor->Stderr().find(kept) != std::string::npos)
        << survivor->Stderr();
  } else {
    ASSERT_TRUE(std::regex_search(
        w.out, m,
        std::regex(R"(RUNNING generation 2 from step (\d+) \(restart 1 of )"
                   R"(3, [0-9.]+ s after the failure; no step is )"
                   R"(recomputed\))")))
        << w.out;
    resumed = std::stoi(m[1]);
    EXPECT_EQ(resumed % 50, 0) << "only a checkpoint's step is announced so";
  }
  EXPECT_GE(resumed, 120);  // where the kill found it
  EXPECT_NE(w.out.find("job ft SUCCEEDED: 1000 steps"), std::string::npos)
      << w.out;
  nlohmann::json res = Result();
  ASSERT_TRUE(res.is_object());
  EXPECT_EQ(res["fingerprint"], reference);
  // The whole job's history: generation 1 from step 0, then 2 from there.
  EXPECT_EQ(res["resumed_from_step"], 0);
  ASSERT_EQ(res["membership"].size(), 2u);
  EXPECT_EQ(res["membership"][1]["from_step"], resumed);
  EXPECT_TRUE(res["membership"][0]["started_at"].is_string()) << res;
  EXPECT_TRUE(res["membership"][1]["started_at"].is_string()) << res;
  // Every sample of the 4 epochs once, in generation 1's steps before
  // `resumed` and generation 2's from it.
  const std::string audit = ExpectExactlyOnce(4);
  EXPECT_NE(audit.find("generations 1 from step 0 on 2 replicas, 2 from step " +
                       std::to_string(resumed) + " on 2 replicas"),
            std::string::npos)
      << audit;
}

// The same guarantee for a text model: a BERT masked-LM job (embeddings,
// attention with the padding mask, the tied MLM head, AdamW with clipping)
// over a text file, 2 workers; rank 1 is killed mid-run, a replacement
// joins, and the run ends with the bytes of an uninterrupted `lockstep
// train` (same masks, same vocabulary, same shards).
nlohmann::json TextFaultJob(const std::string& text_file) {
  return nlohmann::json::parse(R"({
    "name": "ft", "seed": 5, "epochs": 10,
    "model": {"preset": "bert_mlm", "vocab_size": 300, "hidden": 64,
              "layers": 2, "heads": 2, "intermediate": 256,
              "max_positions": 64, "dropout": 0.1},
    "optimizer": {"type": "adamw", "learning_rate": 0.001,
                  "exclude_from_weight_decay": ["LayerNorm", "bias"],
                  "global_clipnorm": 1.0},
    "data": {"format": "text", "train_path": ")" +
                               text_file + R"(",
             "test_path": ")" + text_file +
                               R"(", "vocab_size": 300,
             "sequence_length": 64, "max_predictions": 8},
    "batch_size_per_replica": 8,
    "checkpoint": {"every_steps": 20, "keep": 3},
    "summary": {"every_steps": 10},
    "cluster": {"workers": 2, "replicas_per_worker": 1,
                "fingerprint_every_steps": 20},
    "restart": {"max_restarts": 3, "backoff_seconds": 0.2,
                "replacement_timeout_seconds": 60}})");
}

// Sentences from a small grammar, the same bytes on every run.
std::string WriteText(const std::string& dir) {
  const char* subjects[] = {"the cat",     "a dog",      "my friend",
                            "the old man", "her sister", "the teacher",
                            "a small bird"};
  const char* verbs[] = {"saw",     "liked",    "found",     "carried",
                         "painted", "followed", "remembered"};
  const char* objects[] = {
      "the red house", "a long letter",  "the river",        "an apple",
      "the green hat", "a quiet street", "the morning train"};
  std::string text;
  uint64_t x = 12345;
  for (int i = 0; i < 1500; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    text += std::string(subjects[(x >> 33) % 7]) + " " + verbs[(x >> 40) % 7] +
            " " + objects[(x >> 47) % 7] + " and then " + verbs[(x >> 54) % 7] +
            " " + objects[(x >> 20) % 7] + ".\n";
  }
  const std::string path = dir + "/corpus.txt";
  WriteStringToFile(path, text);
  return path;
}

// Sharded state with its copies (the default; cluster.shard "gradients",
// so the gradients' pages are handed back between steps too): rank 1 of 2
// is killed with -9 and replaced. Rank 1's part of
// the optimizer state was also kept by rank 0, so the survivor's memory
// holds the whole state: generation 2 starts from it (re-sharded over the
// new world), only the step the kill broke is done again, and the job
// ends on the reference bytes (the unsharded run's) with every sample of
// the 4 epochs used once. Without copies the survivor holds only its part
// and the job goes back to its latest checkpoint (the survivor says why;
// cluster.shard "optimizer").
TEST_F(FaultTest,
       ShardedKilledWorkerResumesFromTheSurvivorsPartsWithTheSameBytes) {
  const std::string reference = ReferenceFingerprint();
  for (bool copies : {true, false}) {
    SCOPED_TRACE(copies ? "with copies" : "without copies");
    Start();
    nlohmann::json job = fault_fixture::Audited(FaultJob(
        {{"cluster", {{"shard", copies ? "gradients" : "optimizer"}}}}));
    if (!copies) {
      job["cluster"]["copies"] = false;
      // The checkpoint path, briefly: 2 epochs (500 steps) leave the status
      // calls below time to find the ranks before the job ends (with 1, a
      // loaded 2-core machine once saw it end first).
      job["epochs"] = 2;
    }
    ASSERT_EQ(Client({"submit", WriteJob(job)}).exit.exit_code, 0);
    WaitForStep(1);
    Subprocess* survivor = RankProcess(0);
    ASSERT_NE(survivor, nullptr);
    WaitForStep(120);
    RunResult w = KillReplaceAndWatch(1);
    EXPECT_EQ(w.exit.exit_code, 0) << w.out << w.err;
    std::smatch m;
    if (!copies) {
      ASSERT_TRUE(std::regex_search(
          w.out, m,
          std::regex(R"(RUNNING generation 2 from step (\d+) \(restart 1 )"
                     R"(of 3, [0-9.]+ s after the failure; (steps \d+\.\.)"
                     R"(\d+ are recomputed|no step is recomputed)\))")))
          << w.out;
      EXPECT_EQ(std::stoi(m[1]) % 50, 0) << "a checkpoint's step";
      const std::string said =
          "the next generation starts from the latest checkpoint: the "
          "optimizer state is sharded (cluster.shard) without copies "
          "(cluster.copies false): this rank holds only its part of it";
      EXPECT_TRUE(survivor->Stdout().find(said) != std::string::npos ||
                  survivor->Stderr().find(said) != std::string::npos)
          << survivor->Stderr();
      EXPECT_NE(w.out.find("job ft SUCCEEDED: 500 steps"), std::string::npos)
          << w.out;
      cluster_.reset();
      continue;
    }
    // From the parts the survivor kept (both: its own and rank 1's copy),
    // unless the kill broke the step right after a checkpoint (1 run in
    // 50), where memory and checkpoint are the same step.
    int resumed = -1;
    if (std::regex_search(
            w.out, m,
            std::regex(R"(RUNNING generation 2 from step (\d+) \(the parts )"
                       R"(the ranks kept in memory, from ranks (\d), \2; the )"
                       R"(latest checkpoint is step (\d+)\) \(restart 1 of )"
                       R"(3, [0-9.]+ s after the failure; only step (\d+), )"
                       R"(which the failure broke, is done again\))"))) {
      std::printf("%s\n", m[0].str().c_str());
      resumed = std::stoi(m[1]);
      EXPECT_GT(resumed, std::stoi(m[3]));
      EXPECT_EQ(std::stoi(m[4]), resumed + 1);
      // Of that step, or (the kill stopped it at the barrier before that
      // step's update) of the step before and that one.
      const std::regex kept(
          "kept the parts of ranks 0 and 1 of the training state of (step " +
          std::to_string(resumed) + "|steps " + std::to_string(resumed - 1) +
          " and " + std::to_string(resumed) +
          " \\(the failure came at the barrier before the update to step " +
          std::to_string(resumed) + ", made on the kept copy\\)) in memory");
      EXPECT_TRUE(std::regex_search(survivor->Stdout(), kept) ||
                  std::regex_search(survivor->Stderr(), kept))
          << survivor->Stdout() << survivor->Stderr();
    } else {
      ASSERT_TRUE(std::regex_search(
          w.out, m,
          std::regex(R"(RUNNING generation 2 from step (\d+) \(restart 1 )"
                     R"(of 3, [0-9.]+ s after the failure; no step is )"
                     R"(recomputed\))")))
          << w.out;
      resumed = std::stoi(m[1]);
      EXPECT_EQ(resumed % 50, 0);
    }
    EXPECT_GE(resumed, 120);
    EXPECT_NE(w.out.find("job ft SUCCEEDED: 1000 steps"), std::string::npos)
        << w.out;
    nlohmann::json res = Result();
    ASSERT_TRUE(res.is_object());
    EXPECT_EQ(res["fingerprint"], reference);
    EXPECT_EQ(res["shard"], "gradients");
    EXPECT_EQ(res["copies"], true);
    const std::string audit = ExpectExactlyOnce(4);
    EXPECT_NE(audit.find("generations 1 from step 0 on 2 replicas, 2 from "
                         "step " +
                         std::to_string(resumed) + " on 2 replicas"),
              std::string::npos)
        << audit;
    cluster_.reset();
  }
}

TEST_F(FaultTest, TextModelKilledWorkerRejoinsWithTheSameBytes) {
  const std::string ref_dir = NewTempDir("text_reference");
  const std::string corpus = WriteText(ref_dir);
  std::string ref_out;
  nlohmann::json ref_result =
      TrainAlone(TextFaultJob(corpus), ref_dir, &ref_out);
  ASSERT_TRUE(ref_result.is_object()) << ref_out;
  std::smatch total;
  ASSERT_TRUE(std::regex_search(ref_out, total,
                                std::regex(R"(steps 0\.\.\d+ of (\d+))")))
      << ref_out;
  const int steps = std::stoi(total[1]);
  ASSERT_GE(steps, 200) << ref_out;  // long enough to be cut mid-run

  Start();
  ASSERT_EQ(Client({"submit", WriteJob(TextFaultJob(corpus))}).exit.exit_code,
            0);
  WaitForStep(steps / 4);
  RunResult w = KillReplaceAndWatch(1);
  EXPECT_EQ(w.exit.exit_code, 0) << w.out << w.err;
  EXPECT_TRUE(
      std::regex_search(w.out, std::regex(R"(RUNNING generation 2 from step)")))
      << w.out;
  EXPECT_NE(w.out.find("job ft SUCCEEDED: " + std::to_string(steps) + " steps"),
            std::string::npos)
      << w.out;
  nlohmann::json res = Result();
  ASSERT_TRUE(res.is_object());
  EXPECT_EQ(res["fingerprint"], ref_result["fingerprint"]);
  // The vocabulary travelled with rank 0's checkpoint slice and sits beside
  // the weights, as `lockstep train` writes it.
  auto vocab = [](const std::string& storage) {
    const std::string ckpts = storage + "/jobs/ft/checkpoints/";
    std::string latest = ReadFileOrEmpty(ckpts + "latest");
    if (!latest.empty()) latest.pop_back();  // the newline
    return ReadFileOrEmpty(ckpts + latest + "/vocab.txt");
  };
  const std::string ref_vocab = vocab(ref_dir + "/storage");
  EXPECT_EQ(ref_vocab.rfind("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", 0), 0u)
      << ref_vocab.substr(0, 40);
  EXPECT_EQ(std::count(ref_vocab.begin(), ref_vocab.end(), '\n'), 300);
  EXPECT_EQ(vocab(cluster_->storage()), ref_vocab);
}

// Sync batch norm: the survivor is inside a sum of the training pass
// (most of a step's messages are now those) when its peer dies. It fails
// at once instead of waiting, the replacement resumes from the checkpoint,
// running statistics included, and the run ends with the bytes of an
// uninterrupted one.
TEST_F(FaultTest, SyncBatchNormKilledWorkerRejoinsWithTheSameBytes) {
  const nlohmann::json job = FaultJob(nlohmann::json::parse(R"({
    "model": {"input_shape": [8, 8, 1], "layers": [
      {"type": "conv2d", "filters": 32, "kernel_size": 3, "padding": "same",
       "use_bias": false},
      {"type": "batch_norm", "momentum": 0.9, "activation": "relu",
       "sync": true},
      {"type": "conv2d", "filters": 32, "kernel_size": 3, "padding": "same",
       "use_bias": false},
      {"type": "batch_norm", "momentum": 0.9, "activation": "relu",
       "sync": true},
      {"type": "flatten"},
      {"type": "dense", "units": 10}]}})"));
  const nlohmann::json reference =
      TrainAlone(job, NewTempDir("sync_reference"));
  ASSERT_TRUE(reference.is_object());
  Start();
  ASSERT_EQ(Client({"submit", WriteJob(job)}).exit.exit_code, 0);
  WaitForStep(120);
  Subprocess* victim = RankProcess(1);
  ASSERT_NE(victim, nullptr);
  victim->Signal(SIGKILL);
  const Clock::time_point killed = Clock::now();
  std::string last;
  ASSERT_TRUE(WaitForStatus("RECOVERING", 10, &last)) << last;
  EXPECT_LT(Since(killed), testing::Scaled(3.0)) << last;
  std::string why;
  ASSERT_TRUE(cluster_->StartWorkers(1, 1, 1, &why)) << why;
  RunResult w = WatchToEnd();
  EXPECT_EQ(w.exit.exit_code, 0) << w.out << w.err;
  EXPECT_NE(w.out.find("RUNNING generation 2 from step"), std::string::npos)
      << w.out;
  EXPECT_NE(w.out.find("job ft SUCCEEDED: 1000 steps"), std::string::npos)
      << w.out;
  EXPECT_EQ(Result()["fingerprint"], reference["fingerprint"]);
}

// A torch CNN exported as ONNX (batch norms, a residual add, dropout):
// the same guarantee as a native model's. The replacement imports the graph
// again, resumes from the checkpoint (running statistics and the dropout
// stream included) and the run ends with the bytes of an uninterrupted one.
TEST_F(FaultTest, OnnxModelKilledWorkerRejoinsWithTheSameBytes) {
  LOCKSTEP_SKIP_OR_FAIL_IF_MISSING(testing::TorchMissing());
  const std::string graph = NewTempDir("onnx_graph");
  RunResult ref = testing::RunProcess(
      {"/usr/bin/python3", testing::Runfile("tests/torch_onnx_reference.py"),
       "--out", graph, "--channels", "1", "--height", "8", "--width", "8",
       "--filters", "16", "--hidden", "32", "--classes", "10", "--dropout",
       "0.2"},
      graph, 180);
  ASSERT_EQ(ref.exit.exit_code, 0) << ref.err;
  nlohmann::json job = FaultJob();
  job["model"] = {{"onnx", graph + "/model.onnx"}};
  const nlohmann::json reference = TrainAlone(job, NewTempDir("onnx_ref"));
  ASSERT_TRUE(reference.is_object());
  EXPECT_GT(reference["test_accuracy"].get<double>(), 0.6);  // chance 0.1
  Start();
  ASSERT_EQ(Client({"submit", WriteJob(job)}).exit.exit_code, 0);
  WaitForStep(120);
  RunResult w = KillReplaceAndWatch(1);
  EXPECT_EQ(w.exit.exit_code, 0) << w.out << w.err;
  EXPECT_NE(w.out.find("RUNNING generation 2 from step"), std::string::npos)
      << w.out;
  EXPECT_EQ(Result()["fingerprint"], reference["fingerprint"]);
}

TEST_F(FaultTest, WorkerStoppedWithSigtermFinishesItsStepAndLosesNothing) {
  const std::string reference = ReferenceFingerprint();
  Start();
  ASSERT_EQ(Client({"submit", WriteJob(FaultJob())}).exit.exit_code, 0);
  WaitForStep(120);
  Subprocess* leaving = RankProcess(1);
  ASSERT_NE(leaving, nullptr);
  leaving->Signal(SIGTERM);  // what Kubernetes sends before a restart
  const testing::ExitInfo e = leaving->Wait(15);
  ASSERT_TRUE(e.exited) << leaving->Stdout();
  EXPECT_EQ(e.exit_code, 0) << leaving->Stderr();
  std::string last;
  ASSERT_TRUE(WaitForStatus("RECOVERING", 10, &last)) << last;
  EXPECT_TRUE(std::regex_search(
      last,
      std::regex(
          R"(rank 1 \(w\d on \S+ pid \d+\) left: the worker is shutting down)")))
      << last;
  // It finished its step, and every rank saved a checkpoint of that step
  // before the generation ended.
  std::smatch m;
  const std::string log = leaving->Stdout();
  ASSERT_TRUE(std::regex_search(
      log, m,
      std::regex(R"(rank=1 step=(\d+): this worker is shutting down: the )"
                 R"(generation ends after this step)")))
      << log;
  const int drained = std::stoi(m[1]);
  EXPECT_GE(drained, 120);
  EXPECT_NE(log.find("the worker is shutting down: left after step " +
                     std::to_string(drained)),
            std::string::npos)
      << log;
  std::string why;
  ASSERT_TRUE(cluster_->StartWorkers(1, 1, 1, &why)) << why;
  RunResult w = WatchToEnd();
  EXPECT_EQ(w.exit.exit_code, 0) << w.out << w.err;
  EXPECT_NE(w.out.find("1 worker is shutting down: generation 1 ends after "
                       "step " +
                       std::to_string(drained) + " with a checkpoint of it"),
            std::string::npos)
      << w.out;
  // Nothing is lost: generation 2 starts at the step the worker left at,
  // and a planned leave spends none of the job's restarts.
  EXPECT_NE(w.out.find("RUNNING generation 2 from step " +
                       std::to_string(drained) +
                       " (after a planned leave, "),
            std::string::npos)
      << w.out;
  EXPECT_NE(w.out.find(" no restart counted; "), std::string::npos) << w.out;
  EXPECT_EQ(Client({"status", "ft"}).out.find(" restarts"),
            std::string::npos);
  EXPECT_NE(w.out.find("; no step is recomputed)"), std::string::npos) << w.out;
  nlohmann::json res = Result();
  EXPECT_EQ(res["fingerprint"], reference);
  EXPECT_EQ(res["membership"].back()["from_step"], drained);
}

TEST_F(FaultTest, BothWorkersStoppedWithSigtermLeaveAndNewOnesLoseNothing) {
  // A node drain: both pods get SIGTERM, a moment apart. Whichever step
  // the first one stops at, both leave the membership and exit 0.
  const std::string reference = ReferenceFingerprint();
  Start();
  ASSERT_EQ(Client({"submit", WriteJob(FaultJob())}).exit.exit_code, 0);
  WaitForStep(120);
  Subprocess* first = RankProcess(1);
  Subprocess* second = RankProcess(0);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  first->Signal(SIGTERM);
  usleep(20000);
  second->Signal(SIGTERM);
  for (Subprocess* p : {first, second}) {
    const testing::ExitInfo e = p->Wait(15);
    ASSERT_TRUE(e.exited) << p->Stdout();
    EXPECT_EQ(e.exit_code, 0) << p->Stderr();
  }
  const std::string log = cluster_->coordinator().Stdout();
  for (Subprocess* p : {first, second}) {
    EXPECT_TRUE(
        std::regex_search(log, std::regex("worker w\\d on \\S+ pid " +
                                          std::to_string(p->pid()) + " left")))
        << log;
  }
  // Neither is counted on any more: both are listed as lost.
  RunResult list = Client({"list"});
  EXPECT_TRUE(
      std::regex_search(list.out, std::regex(R"(workers: 2\n(.*LOST\n){2})")))
      << list.out;
  std::string why;
  ASSERT_TRUE(cluster_->StartWorkers(2, 1, 1, &why)) << why;
  RunResult w = WatchToEnd();
  EXPECT_EQ(w.exit.exit_code, 0) << w.out << w.err;
  EXPECT_NE(w.out.find("; no step is recomputed)"), std::string::npos) << w.out;
  EXPECT_EQ(Result()["fingerprint"], reference);
}

TEST_F(FaultTest, StoppedWorkerIsNamedWithStepAndBucketThenReplacedByItself) {
  const std::string reference = ReferenceFingerprint();
  Start({"--worker-timeout", "8", "--hang-timeout", "10"});
  ASSERT_EQ(Client({"submit", WriteJob(FaultJob())}).exit.exit_code, 0);
  WaitForStep(120);
  Subprocess* stuck_process = RankProcess(1);
  ASSERT_NE(stuck_process, nullptr);
  Subprocess& stuck = *stuck_process;
  stuck.Signal(SIGSTOP);
  std::string last;
  // Within the report time (3 s here) status names the missing rank, the
  // step and the collective it holds up (at an epoch's end, the
  // evaluation's).
  ASSERT_TRUE(WaitForStatus(
      R"(the ring is stalled: rank 0 has waited \d+\.\d s for rank 1 at step \d+ \((gradient bucket \d+|the loss all-reduce|the evaluation all-reduce)\))",
      15, &last))
      << last;
  EXPECT_TRUE(std::regex_search(
      last, std::regex(R"(rank 0 w\d[\s\S]*waiting: rank 0 has waited)")))
      << last;
  // Silent for --worker-timeout: lost, and the reason says where the ring
  // waited for it.
  ASSERT_TRUE(WaitForStatus("RECOVERING", 15, &last)) << last;
  EXPECT_TRUE(std::regex_search(
      last,
      std::regex(
          R"(rank 1 \(w\d on \S+ pid \d+, \S+\) lost: no heartbeat for \d+\.\d s; rank 0 has waited \d+\.\d s for rank 1 at step \d+)")))
      << last;
  // SIGCONT: the process learns it was dropped, registers again and is the
  // replacement.
  stuck.Signal(SIGCONT);
  RunResult w = WatchToEnd();
  EXPECT_EQ(w.exit.exit_code, 0) << w.out << w.err;
  EXPECT_TRUE(stuck.WaitForOutput("registering again", 10)) << stuck.Stdout();
  EXPECT_NE(w.out.find("RUNNING generation 2 from step"), std::string::npos)
      << w.out;
  EXPECT_EQ(Result()["fingerprint"], reference);
}

// A worker whose --advertise address cannot be reached (a port nothing
// listens on): its previous rank cannot connect and reports it within the
// ring's keepalive time, so the coordinator drops that worker, not its
// healthy neighbour. Before, the two ranks waited on each other until the
// hang timeout and the coordinator blamed whichever wait it read, so the
// healthy worker could be excluded and the broken one kept.
TEST_F(FaultTest, AnUnreachableAdvertisedAddressIsBlamedNotItsNeighbour) {
  const std::string reference = ReferenceFingerprint();
  dir_ = testing::NewTempDir(
      ::testing::UnitTest::GetInstance()->current_test_info()->name());
  // A hang timeout far past the test's waits: only the report can drop a
  // rank here.
  cluster_ = std::make_unique<testing::LocalCluster>(
      dir_, std::vector<std::string>{"--hang-timeout", "300"});
  ASSERT_TRUE(cluster_->ok()) << cluster_->error();
  std::string why;
  ASSERT_TRUE(cluster_->StartWorkers(1, 1, 1, &why)) << why;
  ASSERT_TRUE(
      cluster_->StartWorkers(1, 1, 1, &why, {"--advertise", "127.0.0.1:1"}))
      << why;
  const pid_t broken = cluster_->worker(1).pid();
  ASSERT_EQ(Client({"submit", WriteJob(FaultJob())}).exit.exit_code, 0);
  std::string last;
  // Twice (it registers again after each drop), then excluded by name.
  ASSERT_TRUE(
      WaitForStatus("1 excluded after failing this job 2 times", 60, &last))
      << last;
  const std::string coordinator_log = cluster_->coordinator().Stdout();
  const std::regex lost(R"(rank \d \(w\d+ on \S+ pid (\d+), [^)]*\) lost: )");
  int drops = 0;
  for (std::sregex_iterator it(coordinator_log.begin(), coordinator_log.end(),
                               lost);
       it != std::sregex_iterator(); ++it) {
    EXPECT_EQ(std::stoi((*it)[1]), broken) << coordinator_log;
    ++drops;
  }
  EXPECT_GE(drops, 2) << coordinator_log;
  EXPECT_NE(coordinator_log.find("could not connect to rank 1 (127.0.0.1:1)"),
            std::string::npos)
      << coordinator_log;
  EXPECT_NE(coordinator_log.find("127.0.0.1:1) lost: rank 0 reports: rank 1 "
                                 "cannot be reached at its advertised address "
                                 "at step 0"),
            std::string::npos)
      << coordinator_log;
  // A reachable spare takes the place; nothing is lost.
  ASSERT_TRUE(cluster_->StartWorkers(1, 1, 1, &why)) << why;
  RunResult w = WatchToEnd();
  EXPECT_EQ(w.exit.exit_code, 0) << w.out << w.err;
  EXPECT_EQ(Result()["fingerprint"], reference);
}

}  // namespace
}  // namespace lockstep
