// StepTimes' JSON line and the --step-times file (worker/step_times.h).
#include "worker/step_times.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name + "." +
         std::to_string(getpid());
}

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(StepTimes, JsonLineKeepsMicroseconds) {
  StepTimes t;
  t.Add(1, 1717171717.123456);
  t.End(1717171717.125);
  t.End(1717171717.2);  // one end per step: ignored
  t.Add(2, 1717171717.250001);
  const nlohmann::json j = nlohmann::json::parse(t.JsonLine("job \"q\"", 3, 1));
  EXPECT_EQ(j["job"], "job \"q\"");
  EXPECT_EQ(j["generation"], 3);
  EXPECT_EQ(j["rank"], 1);
  EXPECT_EQ(j["steps"], nlohmann::json({1, 2}));
  ASSERT_EQ(j["times"].size(), 2u);
  EXPECT_NEAR(j["times"][0].get<double>(), 1717171717.123456, 1e-6);
  EXPECT_NEAR(j["times"][1].get<double>() - j["times"][0].get<double>(),
              0.126545, 1e-6);
  ASSERT_EQ(j["ends"].size(), 1u);  // step 2 has not ended
  EXPECT_NEAR(j["ends"][0].get<double>(), 1717171717.125, 1e-6);
}

TEST(StepTimes, EmptyRunIsAValidLine) {
  const nlohmann::json j =
      nlohmann::json::parse(StepTimes().JsonLine("a", 1, 0));
  EXPECT_TRUE(j["steps"].empty());
  EXPECT_TRUE(j["times"].empty());
  EXPECT_TRUE(j["ends"].empty());
}

TEST(StepTimes, UnixSecondsIsTheSystemClock) {
  const double now = static_cast<double>(time(nullptr));
  EXPECT_NEAR(UnixSeconds(), now, 2.0);
}

TEST(StepTimes, AppendsOneLinePerRun) {
  const std::string path = TempPath("step_times.jsonl");
  unlink(path.c_str());
  ASSERT_TRUE(CheckStepTimesFile(path).ok());
  EXPECT_EQ(Slurp(path), "");  // created, empty
  ASSERT_TRUE(AppendStepTimes(path, "{\"a\":1}").ok());
  ASSERT_TRUE(AppendStepTimes(path, "{\"b\":2}").ok());
  EXPECT_EQ(Slurp(path), "{\"a\":1}\n{\"b\":2}\n");
  ASSERT_TRUE(CheckStepTimesFile(path).ok());  // keeps what is there
  EXPECT_EQ(Slurp(path), "{\"a\":1}\n{\"b\":2}\n");
}

TEST(StepTimes, BadPathNamesTheFlag) {
  const std::string path = TempPath("no_such_dir") + "/times.jsonl";
  absl::Status s = CheckStepTimesFile(path);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--step-times \"" + path + "\""),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("No such file or directory"), std::string::npos)
      << s.message();
  s = AppendStepTimes(path, "{}");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--step-times"), std::string::npos);
}

}  // namespace
}  // namespace lockstep
