// What the CheckpointStore tests share: the CheckpointTest fixture, a store
// folder of its own per test, a small model and optimizer to commit, and the
// means to look at (and damage) what was written.
#ifndef LOCKSTEP_CORE_CHECKPOINT_CHECKPOINT_TEST_UTIL_H_
#define LOCKSTEP_CORE_CHECKPOINT_CHECKPOINT_TEST_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "core/checkpoint/checkpoint.h"
#include "core/tensor.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace testing {

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = JoinPath(::testing::TempDir(),
                    absl::StrCat("ckpt_", info->name(), "/jobs/x/checkpoints"));
    std::filesystem::remove_all(dir_);
    kernel_ = Tensor({2, 3}, {1, 2, 3, 4, 5, 6});
    bias_ = Tensor({3}, {0.1f, 0.2f, 0.3f});
    moment_ = Tensor({2, 3}, {6, 5, 4, 3, 2, 1});
  }

  CheckpointState State(int64_t step) {
    CheckpointState s;
    s.step = step;
    s.epoch = step / 7;
    s.step_in_epoch = step % 7;
    s.seed = 0xfedcba9876543210ull;
    s.generation = 3;
    s.optimizer_iterations = step;
    s.job_json = "{\"name\":\"x\",\"seed\":\"\\u00e9\"}";
    s.train_loss = 0.25;
    return s;
  }

  absl::Status Commit(CheckpointStore& store, int64_t step) {
    kernel_.data()[0] = static_cast<float>(step);  // distinguish checkpoints
    return store.Commit(State(step),
                        {{"dense/kernel", &kernel_}, {"dense/bias", &bias_}},
                        {{"adam/m/dense/kernel", &moment_}});
  }

  std::string Path(const std::string& rel) { return JoinPath(dir_, rel); }

  std::string Latest() {
    auto s = ReadFile(Path("latest"));
    return s.ok() ? *s : "<" + std::string(s.status().message()) + ">";
  }

  std::vector<std::string> Entries() {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      out.push_back(e.path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  void FlipByte(const std::string& path, int64_t offset) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(offset);
    char c;
    f.get(c);
    f.seekp(offset);
    f.put(static_cast<char>(c ^ 0x40));
  }

  // Byte offset of the data section of a safetensors file.
  int64_t DataStart(const std::string& path) {
    auto bytes = ReadFile(path);
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) {
      n |= static_cast<uint64_t>(static_cast<uint8_t>((*bytes)[i])) << (8 * i);
    }
    return 8 + static_cast<int64_t>(n);
  }

  std::string dir_;
  Tensor kernel_, bias_, moment_;
};

}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_CHECKPOINT_CHECKPOINT_TEST_UTIL_H_
