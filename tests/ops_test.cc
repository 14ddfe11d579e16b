// Operations against a real local cluster: gRPC health (ready, liveness,
// NOT_SERVING before registration and after shutdown), Prometheus metrics
// on the coordinator and a worker, JSON logs, the coordinator writing its
// journal on SIGTERM, and the dashboard driven in headless Chromium.
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <regex>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/local_cluster.h"
#include "tests/subprocess.h"
#include "tests/test_jobs.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
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

// The first capture of `re` in the process's output once it appears
// (bounded wait); "" otherwise.
std::string WaitForMatch(Subprocess& p, const std::string& re,
                         double timeout_s = 20) {
  const std::regex r(re);
  const Clock::time_point t0 = Clock::now();
  while (Since(t0) < timeout_s) {
    std::smatch m;
    const std::string out = p.Stdout();
    if (std::regex_search(out, m, r)) return m[1];
    usleep(50000);
  }
  return "";
}

// GET http://ADDRESS/PATH; the body, or "" (with a test failure).
std::string Get(const std::string& address, const std::string& path) {
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

class OpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = NewTempDir(
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    cluster_ = std::make_unique<LocalCluster>(
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

  RunResult Health(const std::string& address,
                   const std::string& service = "") {
    std::vector<std::string> argv = {Runfile("client/lockstep"), "health",
                                     address};
    if (!service.empty()) {
      argv.push_back("--service");
      argv.push_back(service);
    }
    return RunProcess(argv, dir_, 20);
  }

  std::string WriteJob(const nlohmann::json& job) {
    const std::string path = dir_ + "/job.json";
    WriteStringToFile(path, job.dump(2));
    return path;
  }

  std::string dir_, http_, health_;
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(OpsTest, HealthFollowsRegistrationAndShutdown) {
  RunResult ready = Health(health_);
  EXPECT_EQ(ready.exit.exit_code, 0) << ready.err;
  EXPECT_EQ(ready.out, "SERVING\n");
  // The main (job and cluster) port answers the same protocol.
  EXPECT_EQ(Health(cluster_->address(), "liveness").out, "SERVING\n");
  RunResult unknown = Health(health_, "lockstep.v1.JobService");
  EXPECT_EQ(unknown.exit.exit_code, 1);
  EXPECT_THAT(unknown.err,
              HasSubstr("unknown service \"lockstep.v1.JobService\""));

  // A worker whose coordinator is not there: alive but not ready.
  Subprocess lonely(
      {Runfile("client/lockstep"), "worker", "--coordinator", "127.0.0.1:1",
       "--health-listen", "127.0.0.1:0", "--threads", "1"},
      dir_);
  const std::string lonely_health =
      WaitForMatch(lonely, R"(gRPC health \(plaintext, for probes\) on (\S+))");
  ASSERT_FALSE(lonely_health.empty()) << lonely.Stdout() << lonely.Stderr();
  RunResult not_ready = Health(lonely_health);
  EXPECT_EQ(not_ready.exit.exit_code, 1);
  EXPECT_EQ(not_ready.out, "NOT_SERVING\n");
  EXPECT_EQ(Health(lonely_health, "liveness").out, "SERVING\n");
  lonely.Signal(SIGTERM);
  const testing::ExitInfo le = lonely.Wait(15);
  ASSERT_TRUE(le.exited) << lonely.Stdout();
  EXPECT_EQ(le.exit_code, 0) << lonely.Stderr();

  // Registered: ready.
  StartWorker(0);
  const std::string worker_health = WaitForMatch(
      cluster_->worker(0),
      R"re("msg":"gRPC health \(plaintext, for probes\) on ([^"]+)")re");
  ASSERT_FALSE(worker_health.empty()) << cluster_->worker(0).Stdout();
  EXPECT_EQ(Health(worker_health).out, "SERVING\n");

  // SIGTERM to the coordinator: it writes its journal and exits 0.
  const std::string journal = cluster_->storage() + "/coordinator/journal.pb";
  unlink(journal.c_str());
  cluster_->coordinator().Signal(SIGTERM);
  const testing::ExitInfo ce = cluster_->coordinator().Wait(15);
  ASSERT_TRUE(ce.exited) << cluster_->coordinator().Stdout();
  EXPECT_EQ(ce.exit_code, 0) << cluster_->coordinator().Stderr();
  EXPECT_THAT(cluster_->coordinator().Stdout(),
              HasSubstr("shutting down: journal written to " + journal));
  EXPECT_FALSE(ReadFileOrEmpty(journal).empty());
  // Its worker stays registered (the journal keeps its membership), and
  // alive; a coordinator started on the same storage takes it back.
  EXPECT_EQ(Health(worker_health, "liveness").out, "SERVING\n");
  EXPECT_EQ(Health(worker_health).out, "SERVING\n");
  ASSERT_TRUE(cluster_->RestartCoordinator());
  EXPECT_THAT(cluster_->coordinator().Stdout(),
              HasSubstr("1 workers expected to heartbeat again"));
  RunResult list = cluster_->Client({"list"});
  EXPECT_THAT(list.out, HasSubstr("workers: 1\n")) << list.out << list.err;
  // SIGTERM to an idle worker: it leaves the membership at once and exits 0.
  cluster_->worker(0).Signal(SIGTERM);
  const testing::ExitInfo we = cluster_->worker(0).Wait(15);
  ASSERT_TRUE(we.exited);
  EXPECT_EQ(we.exit_code, 0);
  EXPECT_THAT(cluster_->worker(0).Stdout(), HasSubstr("left the cluster"));
  EXPECT_TRUE(cluster_->coordinator().WaitForOutput(" left", 10))
      << cluster_->coordinator().Stdout();
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

TEST_F(OpsTest, UnusableOpsFlagsAreRefusedNamingTheFlag) {
  const std::string lockstep = Runfile("client/lockstep");
  RunResult yaml =
      RunProcess({lockstep, "coordinator", "--listen", "127.0.0.1:0",
                  "--storage", dir_ + "/s2", "--log-format", "yaml"},
                 dir_, 20);
  EXPECT_EQ(yaml.exit.exit_code, 2);
  EXPECT_THAT(yaml.err, HasSubstr("lockstep coordinator: --log-format: must be "
                                  "\"text\" or \"json\", got \"yaml\""));
  // The coordinator's HTTP port is taken: a second daemon cannot have it.
  RunResult busy =
      RunProcess({lockstep, "coordinator", "--listen", "127.0.0.1:0",
                  "--storage", dir_ + "/s3", "--http", http_},
                 dir_, 20);
  EXPECT_EQ(busy.exit.exit_code, 1);
  EXPECT_THAT(busy.err,
              HasSubstr("--http " + http_ +
                        ": cannot listen there (in use or not a local "
                        "address?)"));
  RunResult worker =
      RunProcess({lockstep, "worker", "--coordinator", cluster_->address(),
                  "--health-listen", health_, "--threads", "1"},
                 dir_, 20);
  EXPECT_EQ(worker.exit.exit_code, 1);
  EXPECT_THAT(worker.err, HasSubstr("--health-listen " + health_ +
                                    ": cannot listen there"));
}

// Chromium from Debian (scripts/install_deps.sh installs it); "" if none.
std::string Chromium() {
  for (const char* path : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

TEST_F(OpsTest, DashboardShowsTheLiveJobWorkersAndCurvesInChromium) {
  const std::string chromium = Chromium();
  if (chromium.empty()) {
    GTEST_SKIP() << "chromium not found: scripts/install_deps.sh installs "
                    "Debian's chromium for this test";
  }
  StartWorker(0);
  StartWorker(1);
  // Long enough to be looked at while it runs.
  RunResult r = cluster_->Client(
      {"submit", WriteJob(testing::TinyJob({{"name", "live"},
                                            {"epochs", 200},
                                            {"cluster", {{"workers", 2}}}}))});
  ASSERT_EQ(r.exit.exit_code, 0) << r.out << r.err;
  // Past the first evaluation, so both curves have points.
  const Clock::time_point t0 = Clock::now();
  nlohmann::json state;
  while (Since(t0) < 60) {
    state = nlohmann::json::parse(Get(http_, "/api/state"), nullptr, false);
    if (state.is_object() && !state["jobs"].empty() &&
        state["jobs"][0]["eval"].size() >= 2) {
      break;
    }
    usleep(100000);
  }
  ASSERT_GE(state["jobs"][0]["eval"].size(), 2u) << state.dump();

  const std::vector<std::string> flags = {chromium,
                                          "--headless",
                                          "--no-sandbox",
                                          "--disable-gpu",
                                          "--disable-dev-shm-usage",
                                          "--no-first-run",
                                          "--disable-background-networking",
                                          "--disable-component-update",
                                          "--disable-sync",
                                          "--disable-quic",
                                          "--virtual-time-budget=4000",
                                          "--window-size=1280,1000"};
  std::vector<std::string> dump = flags;
  dump.push_back("--user-data-dir=" + NewTempDir("chromium-dom"));
  dump.push_back("--dump-dom");
  dump.push_back("http://" + http_ + "/");
  RunResult dom = RunProcess(dump, dir_, 60);
  ASSERT_EQ(dom.exit.exit_code, 0) << dom.err;
  const std::string& html = dom.out;
  // The page ran its script against /api/state and drew what it got.
  EXPECT_THAT(html, HasSubstr("<body data-loaded=\"true\">"));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      html, m,
      std::regex(
          R"re(<tr data-job="live"><td class="name">live</td><td><span class="state RUNNING">RUNNING</span></td><td class="num generation">1</td>.*?<td class="num step">(\d+) / (\d+)</td>)re")))
      << html;
  EXPECT_GT(std::stoi(m[1]), 0);
  EXPECT_GT(std::stoi(m[2]), std::stoi(m[1]));
  for (const char* name : {"w0", "w1"}) {
    EXPECT_TRUE(std::regex_search(
        html,
        std::regex(
            std::string(R"re(<tr data-worker=")re") + name +
            R"re("><td class="name">)re" + name +
            R"re(</td>.*?<td class="job">live</td><td class="num rank">[01]</td><td class="num heartbeat">\d+\.\d s ago</td><td class="alive">busy</td>)re")))
        << name << "\n"
        << html;
  }
  ASSERT_TRUE(std::regex_search(
      html, m,
      std::regex(
          R"re(<svg [^>]*data-job="live" data-kind="loss" data-points="(\d+)" data-eval-points="(\d+)")re")))
      << html;
  EXPECT_GE(std::stoi(m[1]), 3);
  EXPECT_GE(std::stoi(m[2]), 2);
  EXPECT_THAT(html, HasSubstr("data-kind=\"accuracy\""));
  EXPECT_THAT(html, HasSubstr("<path class=\"train\" d=\"M"));
  EXPECT_TRUE(std::regex_search(
      html,
      std::regex(
          R"re(<ul class="events">(<li>[^<]*</li>)*<li>checkpoint \S+step-\d+ committed)re")))
      << html;

  // A screenshot for people, in the test's outputs.
  const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  const std::string png =
      std::string(outputs != nullptr ? outputs : dir_.c_str()) +
      "/dashboard.png";
  std::vector<std::string> shot = flags;
  shot.push_back("--user-data-dir=" + NewTempDir("chromium-shot"));
  shot.push_back("--screenshot=" + png);
  shot.push_back("http://" + http_ + "/");
  RunResult s = RunProcess(shot, dir_, 60);
  EXPECT_EQ(s.exit.exit_code, 0) << s.err;
  const std::string bytes = ReadFileOrEmpty(png);
  ASSERT_GT(bytes.size(), 10000u) << s.err;
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
  EXPECT_EQ(cluster_->Client({"cancel", "live"}).exit.exit_code, 0);
}

}  // namespace
}  // namespace lockstep
