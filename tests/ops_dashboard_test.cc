// The dashboard of a real local cluster driven in headless Chromium: the
// live job, its workers and curves as the page draws them, and a
// screenshot in the test's outputs. The fixture is in ops_fixture.h.
#include "tests/ops_fixture.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/subprocess.h"
#include "tests/test_jobs.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
using ops_fixture::Clock;
using ops_fixture::Get;
using ops_fixture::OpsTest;
using ops_fixture::Since;
using testing::NewTempDir;
using testing::ReadFileOrEmpty;
using testing::RunProcess;
using testing::RunResult;

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
  while (Since(t0) < testing::Scaled(60)) {
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
