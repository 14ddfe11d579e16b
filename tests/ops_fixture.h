// What the operations tests share: bounded waits on a process's output,
// GET over HTTP, and a fixture that starts `lockstep coordinator` with its
// dashboard/metrics port and gRPC health port (workers on demand, with
// metrics, a health port and JSON logs).
#ifndef LOCKSTEP_TESTS_OPS_FIXTURE_H_
#define LOCKSTEP_TESTS_OPS_FIXTURE_H_

#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/local_cluster.h"
#include "tests/subprocess.h"

namespace lockstep {
namespace ops_fixture {

using Clock = std::chrono::steady_clock;

inline double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The first capture of `re` in the process's output once it appears
// (bounded wait); "" otherwise.
inline std::string WaitForMatch(testing::Subprocess& p, const std::string& re,
                                double timeout_s = 20) {
  const std::regex r(re);
  const Clock::time_point t0 = Clock::now();
  while (Since(t0) < testing::Scaled(timeout_s)) {
    std::smatch m;
    const std::string out = p.Stdout();
    if (std::regex_search(out, m, r)) return m[1];
    usleep(50000);
  }
  return "";
}

// GET http://ADDRESS/PATH; the body, or "" (with a test failure).
inline std::string Get(const std::string& address, const std::string& path) {
  const size_t colon = address.rfind(':');
  httplib::Client client(address.substr(0, colon),
                         std::stoi(address.substr(colon + 1)));
  client.set_read_timeout(10, 0);
  auto res = client.Get(path.c_str());
  if (!res || res->status != 200) {
    ADD_FAILURE() << "GET " << address << path << " failed";
    return "";
  }
  return res->body;
}

class OpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::NewTempDir(
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    cluster_ = std::make_unique<testing::LocalCluster>(
        dir_, std::vector<std::string>{"--http", "127.0.0.1:0",
                                       "--health-listen", "127.0.0.1:0"});
    ASSERT_TRUE(cluster_->ok()) << cluster_->error();
    http_ = WaitForMatch(cluster_->coordinator(),
                         R"(dashboard on http://(\S+)/ \(metrics at)");
    health_ = WaitForMatch(cluster_->coordinator(),
                           R"(gRPC health \(plaintext, for probes\) on (\S+))");
    ASSERT_FALSE(http_.empty()) << cluster_->coordinator().Stdout();
    ASSERT_FALSE(health_.empty()) << cluster_->coordinator().Stdout();
  }

  // Worker i (named w<i>) with metrics, a health port and JSON logs.
  void StartWorker(int i) {
    std::string why;
    ASSERT_TRUE(cluster_->StartWorkers(
        1, 1, 1, &why,
        {"--name", "w" + std::to_string(i), "--http", "127.0.0.1:0",
         "--health-listen", "127.0.0.1:0", "--log-format", "json"}))
        << why;
  }
  std::string WorkerHttp(int i) {
    return WaitForMatch(cluster_->worker(i),
                        R"("msg":"metrics on http://([^/"]+)/metrics")");
  }

  testing::RunResult Health(const std::string& address,
                            const std::string& service = "") {
    std::vector<std::string> argv = {testing::Runfile("client/lockstep"),
                                     "health", address};
    if (!service.empty()) {
      argv.push_back("--service");
      argv.push_back(service);
    }
    return testing::RunProcess(argv, dir_, 20);
  }

  std::string WriteJob(const nlohmann::json& job) {
    const std::string path = dir_ + "/job.json";
    testing::WriteStringToFile(path, job.dump(2));
    return path;
  }

  std::string dir_, http_, health_;
  std::unique_ptr<testing::LocalCluster> cluster_;
};

}  // namespace ops_fixture
}  // namespace lockstep

#endif  // LOCKSTEP_TESTS_OPS_FIXTURE_H_
