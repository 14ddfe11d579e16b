// `lockstep worker --step-times FILE` in a real cluster: a coordinator and 2
// worker processes on 127.0.0.1 train a small job; each worker's file then
// holds one JSON line for its rank with every step's end time, in order and
// within the run. A path that cannot be opened stops the worker at once
// with an error naming the flag.
#include <signal.h>
#include <unistd.h>

#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/subprocess.h"
#include "tests/test_jobs.h"

namespace lockstep {
namespace {

using testing::ReadFileOrEmpty;
using testing::Runfile;
using testing::RunProcess;
using testing::RunResult;
using testing::Subprocess;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

TEST(StepTimesCluster, EachWorkerWritesItsRanksStepEnds) {
  const std::string dir = testing::NewTempDir("step_times");
  const std::string lockstep = Runfile("client/lockstep");
  Subprocess coordinator(
      {lockstep, "coordinator", "--listen", "127.0.0.1:0", "--storage",
       dir + "/storage", "--address-file", dir + "/address"},
      dir);
  std::string address;
  for (int i = 0; i < testing::Scaled(300) && address.empty(); ++i) {
    const std::string a = ReadFileOrEmpty(dir + "/address");
    if (!a.empty() && a.back() == '\n') address = a.substr(0, a.size() - 1);
    if (address.empty()) usleep(50000);
  }
  ASSERT_FALSE(address.empty()) << coordinator.Stderr();
  std::vector<std::unique_ptr<Subprocess>> workers;
  for (int i = 0; i < 2; ++i) {
    workers.push_back(std::make_unique<Subprocess>(
        std::vector<std::string>{lockstep, "worker", "--coordinator", address,
                                 "--threads", "1", "--step-times",
                                 dir + "/times" + std::to_string(i) + ".jsonl"},
        dir));
  }
  for (auto& w : workers) {
    ASSERT_TRUE(w->WaitForOutput("registered with", 30))
        << w->Stdout() << w->Stderr();
  }
  nlohmann::json job = testing::TinyJob(nlohmann::json::parse(R"({
    "name": "timed", "epochs": 1,
    "cluster": {"workers": 2, "replicas_per_worker": 1}})"));
  const std::string job_path = dir + "/job.json";
  testing::WriteStringToFile(job_path, job.dump(2));
  const double before = static_cast<double>(time(nullptr)) - 1;
  RunResult sub = RunProcess(
      {lockstep, "submit", job_path, "--coordinator", address, "--wait"}, dir,
      120);
  ASSERT_EQ(sub.exit.exit_code, 0) << sub.out << sub.err;
  // 1000 samples in global batches of 2 x 16: 32 steps.
  const int steps = 32;

  std::set<int> ranks;
  for (int i = 0; i < 2; ++i) {
    const std::string path = dir + "/times" + std::to_string(i) + ".jsonl";
    // Written just after the worker's Finish: give it a moment.
    std::vector<std::string> lines;
    for (int k = 0; k < testing::Scaled(200) && lines.empty(); ++k) {
      lines = Lines(ReadFileOrEmpty(path));
      if (lines.empty()) usleep(50000);
    }
    const double after = static_cast<double>(time(nullptr)) + 1;
    ASSERT_EQ(lines.size(), 1u) << path << ":\n" << ReadFileOrEmpty(path);
    const nlohmann::json j = nlohmann::json::parse(lines[0]);
    EXPECT_EQ(j["job"], "timed");
    EXPECT_EQ(j["generation"], 1);
    ranks.insert(j["rank"].get<int>());
    ASSERT_EQ(j["steps"].size(), static_cast<size_t>(steps)) << lines[0];
    ASSERT_EQ(j["times"].size(), static_cast<size_t>(steps)) << lines[0];
    ASSERT_EQ(j["ends"].size(), static_cast<size_t>(steps)) << lines[0];
    double last = before;
    for (int s = 0; s < steps; ++s) {
      EXPECT_EQ(j["steps"][s].get<int>(), s + 1);
      const double t = j["times"][s].get<double>();
      const double end = j["ends"][s].get<double>();
      EXPECT_GE(t, last) << "step " << s + 1;
      EXPECT_GE(end, t) << "step " << s + 1;
      EXPECT_LE(end, after) << "step " << s + 1;
      last = end;
    }
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1}));
  for (auto& w : workers) w->Signal(SIGTERM);
  for (auto& w : workers) EXPECT_TRUE(w->Wait(30).exited);
}

TEST(StepTimesCluster, UnwritablePathStopsTheWorkerNamingTheFlag) {
  const std::string dir = testing::NewTempDir("step_times_bad");
  const std::string bad = dir + "/no/such/folder/times.jsonl";
  RunResult w =
      RunProcess({Runfile("client/lockstep"), "worker", "--coordinator",
                  "127.0.0.1:1", "--step-times", bad},
                 dir, 30);
  ASSERT_TRUE(w.exit.exited) << w.out << w.err;
  EXPECT_EQ(w.exit.exit_code, 1) << w.out << w.err;
  EXPECT_NE(w.err.find("--step-times \"" + bad +
                       "\": cannot open for appending: No such file or "
                       "directory"),
            std::string::npos)
      << w.err;
}

}  // namespace
}  // namespace lockstep
