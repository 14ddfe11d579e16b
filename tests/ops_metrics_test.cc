// Prometheus metrics and JSON logs against a real local cluster: the
// coordinator's and a worker's metrics, /api/state and every line of a
// worker's JSON log follow a job to its end. The fixture is in
// ops_fixture.h.
#include "tests/ops_fixture.h"

#include <cstdint>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/subprocess.h"
#include "tests/test_jobs.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
using ops_fixture::Get;
using ops_fixture::OpsTest;
using testing::ReadFileOrEmpty;
using testing::RunResult;

// The value of the series `series` (name with labels, exactly as printed),
// or -1 when absent.
double Metric(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(series + " ", 0) == 0) {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return -1;
}

TEST_F(OpsTest, MetricsAndJsonLogsFollowAJobToItsEnd) {
  StartWorker(0);
  StartWorker(1);
  const std::string worker_http = WorkerHttp(0);
  ASSERT_FALSE(worker_http.empty()) << cluster_->worker(0).Stdout();
  EXPECT_EQ(Metric(Get(worker_http, "/metrics"), "lockstep_worker_registered"),
            1);
  RunResult r = cluster_->Client(
      {"submit", WriteJob(testing::TinyJob({{"cluster", {{"workers", 2}}}})),
       "--wait"},
      120);
  ASSERT_EQ(r.exit.exit_code, 0) << r.out << r.err;
  const nlohmann::json result = nlohmann::json::parse(
      ReadFileOrEmpty(cluster_->storage() + "/jobs/tiny/result.json"), nullptr,
      false);
  ASSERT_TRUE(result.is_object());
  const int64_t steps = result["steps"];
  ASSERT_GT(steps, 0);

  const std::string c = Get(http_, "/metrics");
  EXPECT_EQ(Metric(c, "lockstep_coordinator_ready"), 1);
  EXPECT_EQ(Metric(c, "lockstep_jobs{state=\"SUCCEEDED\"}"), 1) << c;
  EXPECT_EQ(Metric(c, "lockstep_job_step{job=\"tiny\"}"), steps) << c;
  EXPECT_EQ(Metric(c, "lockstep_job_restarts_total{job=\"tiny\"}"), 0);
  // A checkpoint every 20 steps and one at each epoch's end and the last.
  EXPECT_GE(Metric(c, "lockstep_job_checkpoints_total{job=\"tiny\"}"),
            steps / 20);
  EXPECT_GT(Metric(c, "lockstep_job_checkpoint_last_bytes{job=\"tiny\"}"),
            1000);
  EXPECT_THAT(c, HasSubstr("lockstep_worker_heartbeat_age_seconds{worker=\""));
  EXPECT_EQ(Metric(c, "lockstep_workers{state=\"idle\"}"), 2) << c;

  const std::string w = Get(worker_http, "/metrics");
  EXPECT_EQ(Metric(w, "lockstep_worker_steps_total"), steps) << w;
  EXPECT_EQ(Metric(w, "lockstep_worker_step_seconds_count"), steps);
  EXPECT_GT(Metric(w, "lockstep_worker_allreduce_bytes_total"), 0);
  EXPECT_GT(Metric(w, "lockstep_worker_allreduce_seconds_sum"), 0);
  EXPECT_GT(Metric(w, "lockstep_worker_checkpoint_upload_seconds_count"), 0);
  EXPECT_EQ(Metric(w, "lockstep_worker_rank"), -1);  // idle again
  EXPECT_EQ(Metric(w, "lockstep_worker_generation"), -1);

  const nlohmann::json state =
      nlohmann::json::parse(Get(http_, "/api/state"), nullptr, false);
  ASSERT_TRUE(state.is_object());
  ASSERT_EQ(state["jobs"].size(), 1u);
  EXPECT_EQ(state["jobs"][0]["state"], "SUCCEEDED");
  EXPECT_GE(state["jobs"][0]["train"].size(), static_cast<size_t>(steps / 10));
  EXPECT_EQ(state["jobs"][0]["eval"].size(), 3u);  // one per epoch

  // Every line of the JSON log is one object; the job's lines name the
  // job, generation, rank and step.
  std::istringstream lines(cluster_->worker(0).Stdout());
  std::string line;
  int job_lines = 0, n = 0;
  while (std::getline(lines, line)) {
    ++n;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_TRUE(j.is_object()) << "not JSON: " << line;
    EXPECT_EQ(j["component"], "worker");
    EXPECT_TRUE(j["time"].is_string());
    EXPECT_TRUE(j["msg"].is_string());
    if (j.contains("job")) {
      ++job_lines;
      EXPECT_EQ(j["job"], "tiny");
      EXPECT_EQ(j["generation"], 1) << line;
      EXPECT_TRUE(j["rank"].is_number_integer()) << line;
      ASSERT_TRUE(j["step"].is_number_integer()) << line;
      EXPECT_GE(j["step"].get<int64_t>(), 0);
      EXPECT_LE(j["step"].get<int64_t>(), steps);
    }
  }
  EXPECT_GT(n, 3);
  EXPECT_GT(job_lines, 0) << cluster_->worker(0).Stdout();
}

}  // namespace
}  // namespace lockstep
