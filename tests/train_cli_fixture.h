// What the `lockstep train` tests share: the binary, the time limit of a
// run, and a fixture that writes job files to a fresh folder, runs
// `lockstep train` on them and reads result.json back.
#ifndef LOCKSTEP_TESTS_TRAIN_CLI_FIXTURE_H_
#define LOCKSTEP_TESTS_TRAIN_CLI_FIXTURE_H_

#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/subprocess.h"

namespace lockstep {
namespace train_cli_fixture {

inline constexpr double kTimeout = 120;

inline std::string Binary() { return testing::Runfile("client/lockstep"); }

inline bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

class TrainCliTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::NewTempDir("train_cli"); }

  std::string WriteJob(const nlohmann::json& job,
                       const std::string& file = "job.json") {
    std::string path = dir_ + "/" + file;
    testing::WriteStringToFile(path, job.dump(2));
    return path;
  }

  testing::RunResult Train(const std::string& job_path,
                           const std::string& storage,
                           std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {
        Binary(), "train", job_path, "--storage", storage, "--threads", "1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return testing::RunProcess(argv, dir_, kTimeout);
  }

  nlohmann::json Result(const std::string& storage, const std::string& name) {
    std::string text =
        testing::ReadFileOrEmpty(storage + "/jobs/" + name + "/result.json");
    return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  }

  std::string dir_;
};

}  // namespace train_cli_fixture
}  // namespace lockstep

#endif  // LOCKSTEP_TESTS_TRAIN_CLI_FIXTURE_H_
