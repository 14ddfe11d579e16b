// What the fault-injection tests share (DESIGN "Failure and rejoin"): the
// job they interrupt, an uninterrupted `lockstep train` of it for the
// reference bytes, and a fixture that starts a local cluster of two workers
// and follows job ft through the client verbs.
#ifndef LOCKSTEP_TESTS_FAULT_FIXTURE_H_
#define LOCKSTEP_TESTS_FAULT_FIXTURE_H_

#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/local_cluster.h"
#include "tests/subprocess.h"
#include "tests/test_jobs.h"

namespace lockstep {
namespace fault_fixture {

using Clock = std::chrono::steady_clock;
inline double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Long enough (1,000 steps of a few milliseconds: two convolutions, so a
// fast machine does not finish before the test has acted) to be
// interrupted mid-epoch, short enough for the suite: 2 workers x 1
// replica, a checkpoint every 50 steps.
inline nlohmann::json FaultJob(const nlohmann::json& extra = {}) {
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

// `job` with the sample audit on ("audit": {"samples": true}): every rank
// records each step's samples before its collective.
inline nlohmann::json Audited(nlohmann::json job) {
  job["audit"] = {{"samples", true}};
  return job;
}

class FaultTest : public ::testing::Test {
 protected:
  // An uninterrupted `lockstep train` of `job` (named ft) in `dir`: its
  // result.json (null when it failed; the test fails too) and output.
  static nlohmann::json TrainAlone(const nlohmann::json& job,
                                   const std::string& dir,
                                   std::string* out = nullptr) {
    testing::WriteStringToFile(dir + "/job.json", job.dump(2));
    testing::RunResult r = testing::RunProcess(
        {testing::Runfile("client/lockstep"), "train", dir + "/job.json",
         "--storage", dir + "/storage", "--threads", "1"},
        dir, 300);
    EXPECT_EQ(r.exit.exit_code, 0) << r.out << r.err;
    if (out != nullptr) *out = r.out;
    return nlohmann::json::parse(
        testing::ReadFileOrEmpty(dir + "/storage/jobs/ft/result.json"), nullptr,
        false);
  }

  // The uninterrupted run's fingerprint of FaultJob(), computed once.
  static std::string ReferenceFingerprint() {
    static std::string* fp = nullptr;
    if (fp == nullptr) {
      nlohmann::json res =
          TrainAlone(FaultJob(), testing::NewTempDir("reference"));
      fp = new std::string(res.is_object()
                               ? res["fingerprint"].get<std::string>()
                               : "no reference result");
    }
    return *fp;
  }

  void Start(const std::vector<std::string>& coordinator_args = {}) {
    dir_ = testing::NewTempDir(
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    cluster_ = std::make_unique<testing::LocalCluster>(dir_, coordinator_args);
    ASSERT_TRUE(cluster_->ok()) << cluster_->error();
    std::string why;
    ASSERT_TRUE(cluster_->StartWorkers(2, 1, 1, &why)) << why;
  }

  std::string WriteJob(const nlohmann::json& job,
                       const std::string& file = "job.json") {
    const std::string path = dir_ + "/" + file;
    testing::WriteStringToFile(path, job.dump(2));
    return path;
  }

  virtual ~FaultTest() = default;

  // `lockstep ARGS --coordinator ...` against the test's cluster (the
  // network drills run it inside a namespace).
  virtual testing::RunResult Client(std::vector<std::string> args,
                                    double timeout = 120) {
    return cluster_->Client(std::move(args), timeout);
  }
  virtual std::string StorageDir() { return cluster_->storage(); }

  // Polls `status JOB` until its output matches `re`; false after
  // timeout_s (the last output is in *last).
  bool WaitForStatus(const std::string& re, double timeout_s, std::string* last,
                     const std::string& job = "ft") {
    const std::regex r(re);
    const Clock::time_point t0 = Clock::now();
    while (Since(t0) < testing::Scaled(timeout_s)) {
      testing::RunResult s = Client({"status", job}, 10);
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
    while (Since(t0) < testing::Scaled(60)) {
      testing::RunResult s = Client({"status", "ft"}, 10);
      last = s.out + s.err;
      if (StatusStep(last) >= step) return;
      usleep(30000);
    }
    FAIL() << "job ft never passed step " << step << ":\n" << last;
  }

  // `lockstep audit` of job ft: each of `epochs` epochs saw every one of
  // its `samples` training samples exactly once in the accepted history
  // (asserted); the audit's output, for the test's own checks.
  std::string ExpectExactlyOnce(int epochs, int samples = 8000) {
    testing::RunResult a =
        testing::RunProcess({testing::Runfile("client/lockstep"), "audit",
                             StorageDir() + "/jobs/ft"},
                            dir_, 120);
    EXPECT_EQ(a.exit.exit_code, 0) << a.out << a.err;
    for (int e = 0; e < epochs; ++e) {
      const std::string line = "epoch " + std::to_string(e) + ": " +
                               std::to_string(samples) +
                               " samples: " + std::to_string(samples) +
                               " seen once, 0 never, 0 more than once (";
      EXPECT_NE(a.out.find(line), std::string::npos) << line << "\n" << a.out;
    }
    EXPECT_NE(a.out.find("every sample of every complete epoch was seen "
                         "exactly once"),
              std::string::npos)
        << a.out;
    std::printf("audit of job ft:\n%s", a.out.c_str());
    return a.out;
  }

  nlohmann::json Result(const std::string& name = "ft") {
    return nlohmann::json::parse(
        testing::ReadFileOrEmpty(StorageDir() + "/jobs/" + name +
                                 "/result.json"),
        nullptr, false);
  }

  // For a learning test with a PyTorch peer: `job` (named ft) written to
  // DIR/job.json, the batches it trains on written by
  // //benchmarks:data_batches (a data dependency of the test) to
  // DIR/batches for `epochs` epochs, then the job trained by the local
  // cluster (started here) to its end. Its result.json, or null (the test
  // has failed) when any part failed.
  nlohmann::json TrainWithBatches(const nlohmann::json& job,
                                  const std::string& dir, int epochs) {
    testing::WriteStringToFile(dir + "/job.json", job.dump(2));
    testing::RunResult b = testing::RunProcess(
        {testing::Runfile("benchmarks/data_batches"), dir + "/job.json",
         dir + "/batches", std::to_string(epochs)},
        dir, 120);
    EXPECT_EQ(b.exit.exit_code, 0) << b.out << b.err;
    if (b.exit.exit_code != 0) return nullptr;
    Start();
    const testing::RunResult submit = Client({"submit", WriteJob(job)});
    EXPECT_EQ(submit.exit.exit_code, 0) << submit.out << submit.err;
    if (submit.exit.exit_code != 0) return nullptr;
    testing::RunResult w = WatchToEnd();
    EXPECT_EQ(w.exit.exit_code, 0) << w.out << w.err;
    if (w.exit.exit_code != 0) return nullptr;
    return Result();
  }

  // The worker process that holds `rank` of job ft now.
  testing::Subprocess* RankProcess(int rank) {
    testing::RunResult s = Client({"status", "ft"}, 10);
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
  testing::RunResult WatchToEnd() { return Client({"watch", "ft"}, 180); }

  // Kills the process holding `rank` of job ft (SIGKILL), waits (bounded)
  // until the job is RECOVERING, starts one replacement worker and watches
  // the job to its end: the watch's output (a failure on the way is the
  // test's).
  testing::RunResult KillReplaceAndWatch(int rank) {
    testing::Subprocess* victim = RankProcess(rank);
    if (victim == nullptr) return {};
    victim->Signal(SIGKILL);
    std::string last, why;
    if (!WaitForStatus("RECOVERING", 10, &last)) {
      ADD_FAILURE() << "job ft never RECOVERING:\n" << last;
      return {};
    }
    if (!cluster_->StartWorkers(1, 1, 1, &why)) {
      ADD_FAILURE() << why;
      return {};
    }
    return WatchToEnd();
  }

  std::string dir_;
  std::unique_ptr<testing::LocalCluster> cluster_;
};

}  // namespace fault_fixture
}  // namespace lockstep

#endif  // LOCKSTEP_TESTS_FAULT_FIXTURE_H_
