// What the cluster tests share: the binary, the time limit of a client
// call, the one-process tests' tiny job on 2 workers, and a fixture that
// starts `lockstep coordinator` on 127.0.0.1 (workers on demand) and
// drives it with the client verbs.
#ifndef LOCKSTEP_TESTS_CLUSTER_FIXTURE_H_
#define LOCKSTEP_TESTS_CLUSTER_FIXTURE_H_

#include <unistd.h>

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
namespace cluster_fixture {

inline constexpr double kTimeout = 120;

inline std::string Binary() { return testing::Runfile("client/lockstep"); }

// The one-process tests' tiny job on 2 workers; `extra` is merged on top.
inline nlohmann::json TinyJob(const nlohmann::json& extra = {}) {
  nlohmann::json job = testing::TinyJob(nlohmann::json::parse(R"({
    "cluster": {"workers": 2, "replicas_per_worker": 1,
                "fingerprint_every_steps": 25, "bucket_kib": 1}})"));
  if (!extra.is_null()) job.merge_patch(extra);
  return job;
}

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::NewTempDir("cluster");
    cluster_ = std::make_unique<testing::LocalCluster>(dir_);
    ASSERT_TRUE(cluster_->ok()) << cluster_->error();
    storage_ = cluster_->storage();
    address_ = cluster_->address();
  }

  void StartWorkers(int n, int replicas = 1) {
    std::string why;
    ASSERT_TRUE(cluster_->StartWorkers(n, replicas, 1, &why)) << why;
    for (int i = 0; i < n; ++i) workers_.push_back(&cluster_->worker(i));
  }

  std::string WriteJob(const nlohmann::json& job,
                       const std::string& file = "job.json") {
    std::string path = dir_ + "/" + file;
    testing::WriteStringToFile(path, job.dump(2));
    return path;
  }

  testing::RunResult Client(std::vector<std::string> args,
                            double timeout = kTimeout) {
    return cluster_->Client(std::move(args), timeout);
  }

  // Polls `status JOB` until its output matches `re` (bounded).
  bool WaitForStatus(const std::string& job, const std::string& re,
                     double timeout_s, std::string* last) {
    std::regex r(re);
    for (double t = 0; t < timeout_s; t += 0.2) {
      testing::RunResult s = Client({"status", job}, 10);
      *last = s.out + s.err;
      if (std::regex_search(s.out, r)) return true;
      usleep(200000);
    }
    return false;
  }

  nlohmann::json Result(const std::string& storage, const std::string& name) {
    return nlohmann::json::parse(
        testing::ReadFileOrEmpty(storage + "/jobs/" + name + "/result.json"),
        nullptr, false);
  }

  std::string dir_, storage_, address_;
  std::unique_ptr<testing::LocalCluster> cluster_;
  std::vector<testing::Subprocess*> workers_;
};

}  // namespace cluster_fixture
}  // namespace lockstep

#endif  // LOCKSTEP_TESTS_CLUSTER_FIXTURE_H_
