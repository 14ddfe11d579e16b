// Fault injection on a real local cluster (DESIGN "Failure and rejoin"):
// kill -9 a worker and start another, kill -9 the coordinator and start it
// again on the same storage, SIGSTOP a worker (then SIGCONT), corrupt the
// latest checkpoint, run out of file space during checkpoint writes, and
// throw garbage at a worker's collective service. Each test asserts the
// job's outcome, the reason the coordinator reports and, where training
// completes, that the final parameters are byte-identical to an
// uninterrupted run of the same job (`lockstep train` with the same two
// replicas: for two ranks the ring sum is the local sum).
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/local_cluster.h"
#include "tests/subprocess.h"
#include "tests/test_jobs.h"

namespace lockstep {
namespace {

using testing::LocalCluster;
using testing::NewTempDir;
using testing::ReadFileOrEmpty;
using testing::Runfile;
using testing::RunProcess;
using testing::RunResult;
using testing::Subprocess;
using testing::WriteStringToFile;

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Long enough (1,000 steps of a few milliseconds: two convolutions, so a
// fast machine does not finish before the test has acted) to be
// interrupted mid-epoch, short enough for the suite: 2 workers x 1
// replica, a checkpoint every 50 steps.
nlohmann::json FaultJob(const nlohmann::json& extra = {}) {
  nlohmann::json job = testing::TinyJob(nlohmann::json::parse(R"({
    "name": "ft", "epochs": 4,
    "model": {"input_shape": [8, 8, 1], "layers": [
      {"type": "conv2d", "filters": 64, "kernel_size": 3, "padding": "same",
       "activation": "relu"},
      {"type": "conv2d", "filters": 64, "kernel_size": 3, "padding": "same",
       "activation": "relu"},
      {"type": "flatten"},
      {"type": "dense", "units": 10}]},
    "data": {"train_samples": 8000},
    "checkpoint": {"every_steps": 50, "keep": 3},
    "cluster": {"workers": 2, "replicas_per_worker": 1,
                "fingerprint_every_steps": 50},
    "restart": {"max_restarts": 3, "backoff_seconds": 0.2,
                "replacement_timeout_seconds": 60}})"));
  if (!extra.is_null()) job.merge_patch(extra);
  return job;
}

class FaultTest : public ::testing::Test {
 protected:
  // An uninterrupted `lockstep train` of `job` (named ft) in `dir`: its
  // result.json (null when it failed; the test fails too) and output.
  static nlohmann::json TrainAlone(const nlohmann::json& job,
                                   const std::string& dir,
                                   std::string* out = nullptr) {
    WriteStringToFile(dir + "/job.json", job.dump(2));
    RunResult r =
        RunProcess({Runfile("client/lockstep"), "train", dir + "/job.json",
                    "--storage", dir + "/storage", "--threads", "1"},
                   dir, 300);
    EXPECT_EQ(r.exit.exit_code, 0) << r.out << r.err;
    if (out != nullptr) *out = r.out;
    return nlohmann::json::parse(
        ReadFileOrEmpty(dir + "/storage/jobs/ft/result.json"), nullptr, false);
  }

  // The uninterrupted run's fingerprint of FaultJob(), computed once.
  static std::string ReferenceFingerprint() {
    static std::string* fp = nullptr;
    if (fp == nullptr) {
      nlohmann::json res = TrainAlone(FaultJob(), NewTempDir("reference"));
      fp = new std::string(res.is_object()
                               ? res["fingerprint"].get<std::string>()
                               : "no reference result");
    }
    return *fp;
  }

  void Start(const std::vector<std::string>& coordinator_args = {}) {
    dir_ = NewTempDir(
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    cluster_ = std::make_unique<LocalCluster>(dir_, coordinator_args);
    ASSERT_TRUE(cluster_->ok()) << cluster_->error();
    std::string why;
    ASSERT_TRUE(cluster_->StartWorkers(2, 1, 1, &why)) << why;
  }

  std::string WriteJob(const nlohmann::json& job,
                       const std::string& file = "job.json") {
    const std::string path = dir_ + "/" + file;
    WriteStringToFile(path, job.dump(2));
    return path;
  }

  RunResult Client(std::vector<std::string> args, double timeout = 120) {
    return cluster_->Client(std::move(args), timeout);
  }

  // Polls `status JOB` until its output matches `re`; false after
  // timeout_s (the last output is in *last).
  bool WaitForStatus(const std::string& re, double timeout_s, std::string* last,
                     const std::string& job = "ft") {
    const std::regex r(re);
    const Clock::time_point t0 = Clock::now();
    while (Since(t0) < timeout_s) {
      RunResult s = Client({"status", job}, 10);
      *last = s.out + s.err;
      if (std::regex_search(*last, r)) return true;
      usleep(50000);
    }
    return false;
  }

  int StatusStep(const std::string& status) {
    std::smatch m;
    if (std::regex_search(status, m, std::regex(R"(step (\d+)/)"))) {
      return std::stoi(m[1]);
    }
    return -1;
  }

  // Waits until job ft is past `step`.
  void WaitForStep(int step) {
    std::string last;
    const Clock::time_point t0 = Clock::now();
    while (Since(t0) < 60) {
      RunResult s = Client({"status", "ft"}, 10);
      last = s.out + s.err;
      if (StatusStep(last) >= step) return;
      usleep(30000);
    }
    FAIL() << "job ft never passed step " << step << ":\n" << last;
  }

  nlohmann::json Result(const std::string& name = "ft") {
    return nlohmann::json::parse(
        ReadFileOrEmpty(cluster_->storage() + "/jobs/" + name + "/result.json"),
        nullptr, false);
  }

  // The worker process that holds `rank` of job ft now.
  Subprocess* RankProcess(int rank) {
    RunResult s = Client({"status", "ft"}, 10);
    std::smatch m;
    if (!std::regex_search(s.out, m,
                           std::regex("rank " + std::to_string(rank) +
                                      R"( w\d+\s+\S+ pid (\d+))"))) {
      ADD_FAILURE() << "no rank " << rank << " in\n" << s.out;
      return nullptr;
    }
    const pid_t pid = std::stoi(m[1]);
    for (int i = 0; i < cluster_->num_workers(); ++i) {
      if (cluster_->worker(i).pid() == pid) return &cluster_->worker(i);
    }
    ADD_FAILURE() << "pid " << pid << " is not one of the test's workers";
    return nullptr;
  }

  // Runs `watch ft` to the end; its output.
  RunResult WatchToEnd() { return Client({"watch", "ft"}, 180); }

  std::string dir_;
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(FaultTest, KilledWorkerIsReplacedAndTheRunEndsWithTheSameBytes) {
  const std::string reference = ReferenceFingerprint();
  Start();
  ASSERT_EQ(Client({"submit", WriteJob(FaultJob())}).exit.exit_code, 0);
  WaitForStep(120);
  Subprocess* victim = RankProcess(1);
  ASSERT_NE(victim, nullptr);
  const pid_t pid = victim->pid();
  victim->Signal(SIGKILL);
  const Clock::time_point killed = Clock::now();
  std::string last;
  ASSERT_TRUE(WaitForStatus("RECOVERING", 10, &last)) << last;
  const double detection = Since(killed);
  // A broken stream is detected at once (goal: within 3 s).
  EXPECT_LT(detection, 3.0) << last;
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
      std::regex(R"(RECOVERING from generation 1 at step \d+: rank 1 )")))
      << w.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      w.out, m,
      std::regex(R"(RUNNING generation 2 from step (\d+) \(restart 1 of 3, )")))
      << w.out;
  const int resumed = std::stoi(m[1]);
  EXPECT_GE(resumed, 100);     // the checkpoint at or before the kill
  EXPECT_EQ(resumed % 50, 0);  // checkpoints every 50 steps
  EXPECT_NE(w.out.find("job ft SUCCEEDED: 1000 steps"), std::string::npos)
      << w.out;
  nlohmann::json res = Result();
  ASSERT_TRUE(res.is_object());
  EXPECT_EQ(res["fingerprint"], reference);
  EXPECT_EQ(res["resumed_from_step"], resumed);
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
  Subprocess* victim = RankProcess(1);
  ASSERT_NE(victim, nullptr);
  victim->Signal(SIGKILL);
  std::string last;
  ASSERT_TRUE(WaitForStatus("RECOVERING", 10, &last)) << last;
  std::string why;
  ASSERT_TRUE(cluster_->StartWorkers(1, 1, 1, &why)) << why;
  RunResult w = WatchToEnd();
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
  EXPECT_LT(Since(killed), 3.0) << last;
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
  // Nothing is lost: generation 2 starts at the step the worker left at.
  EXPECT_NE(w.out.find("RUNNING generation 2 from step " +
                       std::to_string(drained) + " (restart 1 of 3, "),
            std::string::npos)
      << w.out;
  EXPECT_NE(w.out.find("; no step is recomputed)"), std::string::npos) << w.out;
  nlohmann::json res = Result();
  EXPECT_EQ(res["fingerprint"], reference);
  EXPECT_EQ(res["resumed_from_step"], drained);
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

TEST_F(FaultTest, CoordinatorKilledAndRestartedResumesItsJob) {
  const std::string reference = ReferenceFingerprint();
  Start();
  ASSERT_EQ(Client({"submit", WriteJob(FaultJob())}).exit.exit_code, 0);
  // A watcher started before the crash rides through it.
  std::vector<std::string> argv = {Runfile("client/lockstep"), "watch", "ft",
                                   "--coordinator", cluster_->address()};
  Subprocess watcher(argv, dir_);
  WaitForStep(150);
  cluster_->coordinator().Signal(SIGKILL);
  ASSERT_TRUE(cluster_->coordinator().Wait(10).exited);
  const CheckpointStore store(cluster_->storage() + "/jobs/ft/checkpoints", 3);
  const std::vector<std::string> before = store.ListSteps();
  ASSERT_FALSE(before.empty());
  usleep(500000);
  ASSERT_TRUE(cluster_->RestartCoordinator()) << cluster_->error();
  const testing::ExitInfo e = watcher.Wait(180);
  ASSERT_TRUE(e.exited) << watcher.Stdout();
  EXPECT_EQ(e.exit_code, 0) << watcher.Stdout() << watcher.Stderr();
  EXPECT_NE(watcher.Stderr().find("reconnecting"), std::string::npos)
      << watcher.Stderr();
  EXPECT_NE(watcher.Stdout().find("coordinator restarted: RUNNING at "
                                  "generation 1 taken over from the journal"),
            std::string::npos)
      << watcher.Stdout();
  EXPECT_NE(watcher.Stdout().find("job ft SUCCEEDED: 1000 steps"),
            std::string::npos)
      << watcher.Stdout();
  EXPECT_NE(cluster_->coordinator().Stdout().find(
                "2 workers expected to heartbeat again"),
            std::string::npos)
      << cluster_->coordinator().Stdout();
  nlohmann::json res = Result();
  ASSERT_TRUE(res.is_object());
  EXPECT_EQ(res["fingerprint"], reference);
  // No restart was needed: the workers trained on through the outage.
  RunResult s = Client({"status", "ft"});
  EXPECT_NE(s.out.find("job ft: SUCCEEDED (generation 1)"), std::string::npos)
      << s.out;
  // Every committed checkpoint is whole: the latest verifies and is the
  // last step; nothing committed before the crash was damaged.
  std::vector<std::string> warnings;
  absl::StatusOr<LoadedCheckpoint> latest = store.LoadLatest(&warnings);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->state.step, 1000);
  EXPECT_TRUE(warnings.empty());
  // A second coordinator on the same storage refuses nothing and
  // duplicates nothing: submitting the finished name again resumes at
  // its last step and ends at once with the same bytes.
  RunResult again = Client({"submit", WriteJob(FaultJob()), "--wait"});
  EXPECT_EQ(again.exit.exit_code, 0) << again.out << again.err;
  EXPECT_NE(again.out.find("RUNNING generation 2 from step 1000"),
            std::string::npos)
      << again.out;
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
  // Within the report time (5 s here) status names the missing rank, the
  // step and the collective it holds up.
  ASSERT_TRUE(WaitForStatus(
      R"(the ring is stalled: rank 0 has waited \d+\.\d s for rank 1 at step \d+ \((gradient bucket \d+|the loss all-reduce)\))",
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

TEST_F(FaultTest, DamagedLatestCheckpointFallsBackToThePreviousOne) {
  const std::string reference = ReferenceFingerprint();
  Start();
  // 3 of the 4 epochs (750 steps), then damage the step-750 checkpoint.
  RunResult first =
      Client({"submit", WriteJob(FaultJob({{"epochs", 3}})), "--wait"});
  ASSERT_EQ(first.exit.exit_code, 0) << first.out << first.err;
  const std::string dir = cluster_->storage() + "/jobs/ft/checkpoints";
  const std::string model = dir + "/step-00000750/model.safetensors";
  std::string bytes = ReadFileOrEmpty(model);
  ASSERT_GT(bytes.size(), 1000u);
  bytes[bytes.size() - 100] ^= 0x40;  // one flipped bit in a tensor
  WriteStringToFile(model, bytes);
  // The full job resumes from step 700, says why, and ends with the bytes
  // of the uninterrupted run.
  RunResult second = Client({"submit", WriteJob(FaultJob()), "--wait"});
  ASSERT_EQ(second.exit.exit_code, 0) << second.out << second.err;
  EXPECT_TRUE(std::regex_search(
      second.out,
      std::regex(R"(warning: .*step-00000750.*(CRC|crc|checksum))")))
      << second.out;
  EXPECT_NE(second.out.find("RUNNING generation 2 from step 700"),
            std::string::npos)
      << second.out;
  EXPECT_EQ(Result()["fingerprint"], reference);
}

TEST_F(FaultTest, OutOfFileSpaceDuringCheckpointWritesKeepsTheLatestPointer) {
  const std::string reference = ReferenceFingerprint();
  Start();
  // The coordinator may write files of at most 64 KiB: each checkpoint
  // (about 0.4 MB) fails half-way, the journal and summaries fit.
  struct rlimit limit = {64 << 10, 64 << 10};
  ASSERT_EQ(
      prlimit(cluster_->coordinator().pid(), RLIMIT_FSIZE, &limit, nullptr), 0);
  RunResult r = Client({"submit", WriteJob(FaultJob()), "--wait"});
  // Training is not lost for want of checkpoints; every failure is
  // reported and no half-written checkpoint is left or pointed to.
  EXPECT_EQ(r.exit.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(std::regex_search(
      r.out,
      std::regex(R"(checkpoint step 50 not committed: .*File too large)")))
      << r.out;
  const std::string dir = cluster_->storage() + "/jobs/ft/checkpoints";
  EXPECT_EQ(ReadFileOrEmpty(dir + "/latest"), "");
  std::vector<std::string> left;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") left.push_back(n);
    }
    closedir(d);
  }
  EXPECT_TRUE(left.empty()) << left.size() << " entries, first " << left[0];
  EXPECT_EQ(Result()["fingerprint"], reference);
}

TEST_F(FaultTest, GarbageAtTheCollectiveServiceIsRefusedAndNeverSummed) {
  const std::string reference = ReferenceFingerprint();
  Start();
  std::smatch m;
  const std::string log = cluster_->worker(0).Stdout();
  ASSERT_TRUE(std::regex_search(
      log, m, std::regex(R"(collective service (127\.0\.0\.1):(\d+))")))
      << log;
  const std::string address = m[1].str() + ":" + m[2].str();
  const int port = std::stoi(m[2]);
  ASSERT_EQ(Client({"submit", WriteJob(FaultJob())}).exit.exit_code, 0);
  WaitForStep(100);
  std::mt19937 rng(42);
  // Raw random bytes on the TCP port (not even HTTP/2).
  for (int i = 0; i < 5; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    std::string junk(4096, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    EXPECT_GT(write(fd, junk.data(), junk.size()), 0);
    close(fd);
  }
  // Well-framed gRPC calls of Push whose payload is random bytes.
  grpc::GenericStub stub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  for (int i = 0; i < 5; ++i) {
    std::string junk(1000 + i, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    grpc::Slice slice(junk);
    grpc::ByteBuffer request(&slice, 1), response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    std::promise<grpc::Status> done;
    stub.UnaryCall(&context, "/lockstep.v1.Collective/Push",
                   grpc::StubOptions(), &request, &response,
                   [&done](grpc::Status s) { done.set_value(s); });
    const grpc::Status s = done.get_future().get();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << s.error_message();
    // Push is raw: the bytes reach the frame check, which names the length
    // it read and calls them garbage.
    EXPECT_NE(s.error_message().find(
                  "refused a message of " + std::to_string(1000 + i) + " bytes"),
              std::string::npos)
        << s.error_message();
    EXPECT_NE(s.error_message().find("garbage"), std::string::npos)
        << s.error_message();
  }
  EXPECT_TRUE(cluster_->worker(0).WaitForOutput(
      "collective: refused a message of 1004 bytes", 5))
      << cluster_->worker(0).Stdout();
  RunResult w = WatchToEnd();
  EXPECT_EQ(w.exit.exit_code, 0) << w.out << w.err;
  // Nothing reached the ring: no restart, the bytes of the clean run.
  EXPECT_EQ(w.out.find("RECOVERING"), std::string::npos) << w.out;
  EXPECT_EQ(Result()["fingerprint"], reference);
}

}  // namespace
}  // namespace lockstep
