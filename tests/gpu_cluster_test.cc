// The NCCL data path across processes: a coordinator and two `lockstep
// worker` processes, one GPU each (cuda:0, cuda:1), a job with collective
// "nccl". Checks that the generation runs over NCCL, that the result's
// parameters are the bytes `lockstep train --devices cuda:0,cuda:1` gives
// (for two ranks every sum is g0 + g1, whatever the process layout), and
// that kill -9 of a worker is recovered with those bytes still. NCCL does
// not allow two ranks on one GPU, so this needs two; it skips, saying why,
// with fewer or without the CUDA build. And an elastic job of GPU workers
// over the gRPC ring, which one GPU can hold.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device.h"
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
using testing::WriteStringToFile;

// The tiny job on two one-GPU workers over NCCL, long enough to kill a
// worker in the middle; checkpoints every 20 steps.
nlohmann::json NcclJob() {
  return testing::TinyJob(nlohmann::json::parse(R"({
    "name": "gpu",
    "epochs": 12,
    "checkpoint": {"every_steps": 20, "keep": 3},
    "cluster": {"workers": 2, "replicas_per_worker": 1, "collective": "nccl",
                "fingerprint_every_steps": 20},
    "restart": {"max_restarts": 3, "backoff_seconds": 0.2,
                "replacement_timeout_seconds": 60}})"));
}

std::string WhyNotTwoGpus() {
  absl::StatusOr<std::vector<cuda::DeviceInfo>> d = cuda::VisibleDevices();
  if (!d.ok()) return std::string(d.status().message());
  if (d->size() < 2) {
    return "needs 2 GPUs (NCCL refuses two ranks on one device); " +
           std::to_string(d->size()) + " visible";
  }
  return "";
}

class GpuClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = WhyNotTwoGpus();
    if (!why.empty()) GTEST_SKIP() << why;
    dir_ = NewTempDir("gpu_cluster");
    job_ = dir_ + "/job.json";
    WriteStringToFile(job_, NcclJob().dump(2));
    cluster_ = std::make_unique<LocalCluster>(dir_);
    ASSERT_TRUE(cluster_->ok()) << cluster_->error();
    StartWorker(0);
    StartWorker(1);
  }

  void StartWorker(int gpu) {
    std::string why;
    ASSERT_TRUE(cluster_->StartWorkers(
        1, 1, 1, &why, {"--devices", "cuda:" + std::to_string(gpu)}))
        << why;
  }

  RunResult Client(std::vector<std::string> args, double timeout = 180) {
    return cluster_->Client(std::move(args), timeout);
  }

  nlohmann::json Result(const std::string& storage) {
    return nlohmann::json::parse(
        ReadFileOrEmpty(storage + "/jobs/gpu/result.json"), nullptr, false);
  }

  // `lockstep train` of the same job on both GPUs in one process.
  std::string OneProcessFingerprint() {
    RunResult r = RunProcess({Runfile("client/lockstep"), "train", job_,
                              "--storage", dir_ + "/local", "--devices",
                              "cuda:0,cuda:1"},
                             dir_, 300);
    EXPECT_EQ(r.exit.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("(cuda:0,cuda:1, gradients summed by NCCL)"),
              std::string::npos)
        << r.out;
    nlohmann::json res = Result(dir_ + "/local");
    return res.is_object() ? res["fingerprint"].get<std::string>() : "none";
  }

  std::string dir_, job_;
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(GpuClusterTest, TwoWorkersOverNcclEndWithOneProcesssBytes) {
  RunResult r = Client({"submit", job_, "--wait"});
  ASSERT_EQ(r.exit.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex(R"(RUNNING generation 1 from step 0: .*; all-reduce over nccl)")))
      << r.out;
  EXPECT_NE(r.out.find("job gpu SUCCEEDED: 384 steps"), std::string::npos)
      << r.out;  // ceil(1000 / 32) x 12
  nlohmann::json res = Result(cluster_->storage());
  ASSERT_TRUE(res.is_object()) << r.out;
  EXPECT_GT(res["test_accuracy"].get<double>(), 0.5);
  EXPECT_EQ(res["fingerprint"], OneProcessFingerprint());
  // Both ranks logged their communicator.
  for (int i = 0; i < 2; ++i) {
    const std::string log =
        cluster_->worker(i).Stdout() + cluster_->worker(i).Stderr();
    EXPECT_NE(log.find("NCCL communicator of 2 GPUs ready on cuda:" +
                       std::to_string(i)),
              std::string::npos)
        << log;
  }
}

TEST_F(GpuClusterTest, KilledWorkerIsReplacedAndTheBytesAreTheSame) {
  ASSERT_EQ(Client({"submit", job_}).exit.exit_code, 0);
  // Past step 60, then kill -9 rank 1's process (cuda:1).
  const auto t0 = std::chrono::steady_clock::now();
  std::string last;
  bool past = false;
  while (!past && std::chrono::steady_clock::now() - t0 <
                      std::chrono::seconds(120)) {
    RunResult s = Client({"status", "gpu"}, 10);
    last = s.out + s.err;
    std::smatch m;
    past = std::regex_search(last, m, std::regex(R"(step (\d+)/)")) &&
           std::stoi(m[1]) >= 60;
    if (!past) usleep(30000);
  }
  ASSERT_TRUE(past) << last;
  cluster_->worker(1).Signal(SIGKILL);
  StartWorker(1);  // the replacement, on the same GPU
  RunResult w = Client({"watch", "gpu"}, 240);
  EXPECT_EQ(w.exit.exit_code, 0) << w.out << w.err;
  EXPECT_TRUE(std::regex_search(
      w.out, std::regex(R"(RECOVERING from generation 1: )")))
      << w.out;
  EXPECT_TRUE(std::regex_search(
      w.out,
      std::regex(R"(RUNNING generation 2 from step \d+ .*all-reduce over nccl)")))
      << w.out;
  EXPECT_NE(w.out.find("job gpu SUCCEEDED: 384 steps"), std::string::npos)
      << w.out;
  nlohmann::json res = Result(cluster_->storage());
  ASSERT_TRUE(res.is_object()) << w.out;
  EXPECT_GT(res["membership"].back()["from_step"].get<int>(), 0);
  EXPECT_EQ(res["fingerprint"], OneProcessFingerprint());
}

// An elastic job of GPU workers (on one device: each worker's own
// one-GPU communicator, the gRPC ring between them): kill one of 2, the
// survivor goes on alone after the rejoin grace from the state its GPU
// kept (the failed sum left it intact: at most the broken step redone),
// taking the whole global batch; a new worker joins and the ranks regroup
// at a step boundary from the ranks' memory, no checkpoint written for it.
TEST(GpuElasticTest, ShrinksAndGrowsFromTheGpusMemory) {
  absl::StatusOr<std::vector<cuda::DeviceInfo>> d = cuda::VisibleDevices();
  if (!d.ok() || d->empty()) {
    GTEST_SKIP() << "needs a GPU: "
                 << (d.ok() ? "none visible" : std::string(d.status().message()));
  }
  const std::string dir = NewTempDir("gpu_elastic");
  const std::string job = dir + "/job.json";
  // Thousands of steps a second on a GPU: long enough for a worker to
  // start and join while it runs.
  WriteStringToFile(job, testing::TinyJob(nlohmann::json::parse(R"({
    "name": "gpu", "epochs": null, "steps": 40000,
    "data": {"train_samples": 64000},
    "checkpoint": {"every_steps": 4000, "keep": 3},
    "cluster": {"workers": {"min": 1, "max": 2}, "replicas_per_worker": 1,
                "collective": "ring", "rejoin_grace_seconds": 1},
    "restart": {"max_restarts": 3, "backoff_seconds": 0.2}})"))
                              .dump(2));
  LocalCluster cluster(dir);
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  std::string why;
  const std::vector<std::string> gpu = {"--devices", "cuda:0"};
  ASSERT_TRUE(cluster.StartWorkers(2, 1, 1, &why, gpu)) << why;
  ASSERT_EQ(cluster.Client({"submit", job}, 60).exit.exit_code, 0);
  auto wait_status = [&](const std::string& re) {
    const auto t0 = std::chrono::steady_clock::now();
    std::string last;
    while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120)) {
      RunResult s = cluster.Client({"status", "gpu"}, 10);
      last = s.out + s.err;
      if (std::regex_search(last, std::regex(re))) return true;
      usleep(30000);
    }
    ADD_FAILURE() << "never " << re << ":\n" << last;
    return false;
  };
  ASSERT_TRUE(wait_status(R"(step [1-9]\d{2,}/)"));  // past step 100
  cluster.worker(1).Signal(SIGKILL);
  ASSERT_TRUE(wait_status(R"(RUNNING \(generation 2\))"));
  ASSERT_TRUE(cluster.StartWorkers(1, 1, 1, &why, gpu)) << why;
  RunResult w = cluster.Client({"watch", "gpu"}, 240);
  EXPECT_EQ(w.exit.exit_code, 0) << w.out << w.err;
  EXPECT_NE(w.out.find("membership: 2 -> 1 workers (of 1-2) from step "),
            std::string::npos)
      << w.out;
  // The shrink and the grow: from a rank's memory (or the latest
  // checkpoint, when it is the same step).
  for (const char* generation : {"2", "3"}) {
    std::smatch from;
    ASSERT_TRUE(std::regex_search(
        w.out, from,
        std::regex(absl::StrCat("RUNNING generation ", generation,
                                R"( from step (\d+) (\(rank \d's memory)?)"))))
        << w.out;
    EXPECT_TRUE(from[2].matched || std::stoi(from[1]) % 4000 == 0) << from[0];
  }
  std::smatch grew, joined;
  ASSERT_TRUE(std::regex_search(
      w.out, grew,
      std::regex(R"(growing: generation 2 ended after step (\d+): 1 idle )"
                 R"(worker joins, from 1 to 2 workers)")))
      << w.out;
  ASSERT_TRUE(std::regex_search(
      w.out, joined,
      std::regex(R"(membership: 1 -> 2 workers \(of 1-2\) from step (\d+): )"
                 R"(1 idle worker joins)")))
      << w.out;
  // From the ranks' memory of that very step: no checkpoint of it.
  EXPECT_EQ(grew[1], joined[1]) << w.out;
  if (std::stoi(grew[1]) % 4000 != 0) {
    EXPECT_EQ(w.out.find(absl::StrCat(
                  "checkpoints/step-",
                  absl::StrFormat("%08d", std::stoi(grew[1])), " committed")),
              std::string::npos)
        << w.out;
  }
  EXPECT_NE(w.out.find("job gpu SUCCEEDED: 40000 steps"), std::string::npos)
      << w.out;
  const nlohmann::json res = nlohmann::json::parse(
      ReadFileOrEmpty(cluster.storage() + "/jobs/gpu/result.json"), nullptr,
      false);
  ASSERT_TRUE(res.is_object()) << w.out;
  ASSERT_EQ(res["membership"].size(), 3u) << res.dump(2);
  EXPECT_EQ(res["membership"][1]["workers"], 1);
  EXPECT_EQ(res["membership"][2]["workers"], 2);
  EXPECT_GT(res["test_accuracy"].get<double>(), 0.5);
}

}  // namespace
}  // namespace lockstep
