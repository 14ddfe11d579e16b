#include "core/log.h"

#include <sstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace lockstep {
namespace {

const absl::Time kNow = absl::FromUnixMillis(1795000000123);

TEST(LogTest, TextLineCarriesTheContextBeforeTheMessage) {
  LogRecord r("RUNNING generation 2 from step 500");
  r.job = "mnist";
  r.generation = 2;
  r.rank = 1;
  r.step = 512;
  const std::string line = FormatLogLine(r, "worker", LogFormat::kText, kNow);
  EXPECT_EQ(line.substr(23),
            " worker job=mnist gen=2 rank=1 step=512: RUNNING generation 2 "
            "from step 500");
  EXPECT_EQ(line[4], '-');
  EXPECT_EQ(line[10], 'T');
}

TEST(LogTest, TextLineWithoutContextIsJustTheMessage) {
  const std::string line = FormatLogLine("registered with 127.0.0.1:7070",
                                         "worker", LogFormat::kText, kNow);
  EXPECT_EQ(line.substr(23), " worker registered with 127.0.0.1:7070");
}

TEST(LogTest, JsonLineIsOneObjectWithTheSetFields) {
  LogRecord r("warning: checkpoint step 50 not committed");
  r.job = "j";
  r.generation = 0;
  const std::string line =
      FormatLogLine(r, "coordinator", LogFormat::kJson, kNow);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["time"], "2026-11-18T11:06:40.123Z");
  EXPECT_EQ(j["level"], "warning");
  EXPECT_EQ(j["component"], "coordinator");
  EXPECT_EQ(j["job"], "j");
  EXPECT_EQ(j["generation"], 0);
  EXPECT_FALSE(j.contains("rank"));
  EXPECT_FALSE(j.contains("step"));
  EXPECT_EQ(j["msg"], "warning: checkpoint step 50 not committed");
}

TEST(LogTest, JsonSurvivesInvalidUtf8AndQuotes) {
  const std::string line =
      FormatLogLine(std::string("refused \"x\" \xff\xfe bytes"), "worker",
                    LogFormat::kJson, kNow);
  nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["level"], "info");
  EXPECT_NE(j["msg"].get<std::string>().find("refused \"x\""),
            std::string::npos);
}

TEST(LogTest, LevelsFollowTheMessagePrefix) {
  EXPECT_EQ(LogLevel("warning: x"), "warning");
  EXPECT_EQ(LogLevel("error: x"), "error");
  EXPECT_EQ(LogLevel("registered"), "info");
}

// A record's own level wins over the message's prefix ("worker w2 lost"
// is a warning without saying "warning:").
TEST(LogTest, ARecordsOwnLevelIsTheJsonLevel) {
  LogRecord r("worker w2 lost: no heartbeat for 5.0 s");
  EXPECT_EQ(
      nlohmann::json::parse(FormatLogLine(r, "coordinator", LogFormat::kJson,
                                          absl::UnixEpoch()))["level"],
      "info");
  r.level = "warning";
  EXPECT_EQ(
      nlohmann::json::parse(FormatLogLine(r, "coordinator", LogFormat::kJson,
                                          absl::UnixEpoch()))["level"],
      "warning");
}

TEST(LogTest, ParseLogFormatNamesTheFlag) {
  EXPECT_EQ(*ParseLogFormat("json"), LogFormat::kJson);
  EXPECT_EQ(*ParseLogFormat("text"), LogFormat::kText);
  absl::StatusOr<LogFormat> bad = ParseLogFormat("yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "--log-format: must be \"text\" or \"json\", got \"yaml\"");
}

TEST(LogTest, MakeLoggerWritesOneLinePerRecord) {
  std::ostringstream out;
  LogFn log = MakeLogger("worker", LogFormat::kJson, &out);
  log("one");
  LogRecord r("two");
  r.step = 7;
  log(r);
  std::istringstream lines(out.str());
  std::string a, b, c;
  ASSERT_TRUE(std::getline(lines, a));
  ASSERT_TRUE(std::getline(lines, b));
  EXPECT_FALSE(std::getline(lines, c));
  EXPECT_EQ(nlohmann::json::parse(a)["msg"], "one");
  EXPECT_EQ(nlohmann::json::parse(b)["step"], 7);
}

}  // namespace
}  // namespace lockstep
