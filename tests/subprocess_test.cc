// The sanitizer side of tests/subprocess.h: a process's ThreadSanitizer
// report file fails the test that reaps it, a quiet process does not, and
// under --config=tsan a real race in a child is caught that way and the
// waits are scaled. The children are this binary again, told what to do by
// LOCKSTEP_SUBPROCESS_TEST_CHILD.
#include "tests/subprocess.h"

#include <unistd.h>

#include <array>
#include <memory>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace testing {
namespace {

#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif

long counter = 0;
__attribute__((noinline)) void Add() { ++counter; }

// The child: "report" writes a report where TSAN_OPTIONS's log_path says,
// as TSan would (PREFIX.PID); "quiet" does nothing; "race" races.
const bool kChild = [] {
  const char* mode = std::getenv("LOCKSTEP_SUBPROCESS_TEST_CHILD");
  if (mode == nullptr) return false;
  const std::string m = mode;
  if (m == "report") {
    const std::string options = std::getenv("TSAN_OPTIONS");
    const size_t at = options.rfind("log_path=");
    if (at == std::string::npos) std::_Exit(3);
    std::ofstream(options.substr(at + 9) + "." + std::to_string(getpid()))
        << "WARNING: ThreadSanitizer: data race (written by the test)\n";
  } else if (m == "race") {
    std::thread other([] {
      for (int i = 0; i < 1000; ++i) Add();
    });
    for (int i = 0; i < 1000; ++i) Add();
    other.join();
  }
  std::_Exit(0);
}();

std::string Self() {
  std::array<char, 4096> self{};
  if (readlink("/proc/self/exe", self.data(), self.size() - 1) <= 0) return "";
  return self.data();
}

// Starts this binary as a child in `mode`, with TSAN_OPTIONS set (as the
// tsan config sets it) so that the child gets a log_path.
std::unique_ptr<Subprocess> StartChild(const std::string& mode,
                                       const std::string& dir) {
  const bool had_options = std::getenv("TSAN_OPTIONS") != nullptr;
  if (!had_options) setenv("TSAN_OPTIONS", "halt_on_error=1", 1);
  setenv("LOCKSTEP_SUBPROCESS_TEST_CHILD", mode.c_str(), 1);
  auto child = std::make_unique<Subprocess>(std::vector<std::string>{Self()},
                                            dir);
  unsetenv("LOCKSTEP_SUBPROCESS_TEST_CHILD");
  if (!had_options) unsetenv("TSAN_OPTIONS");
  return child;
}

TEST(SubprocessTest, AReportFileFailsTheTestThatReapsTheProcess) {
  const std::string dir = NewTempDir("report");
  std::unique_ptr<Subprocess> child = StartChild("report", dir);
  ExitInfo e;
  // The failure names the process and carries the report's text.
  EXPECT_NONFATAL_FAILURE(
      e = child->Wait(30),
      "bytes):\nWARNING: ThreadSanitizer: data race (written by the test)");
  EXPECT_TRUE(e.exited);
  EXPECT_EQ(e.exit_code, 0);
}

TEST(SubprocessTest, AQuietProcessFailsNothing) {
  const std::string dir = NewTempDir("quiet");
  std::unique_ptr<Subprocess> child = StartChild("quiet", dir);
  const ExitInfo e = child->Wait(30);
  EXPECT_TRUE(e.exited);
  EXPECT_EQ(e.exit_code, 0);
}

TEST(SubprocessTest, UnderThreadSanitizerARaceInAChildFailsTheTest) {
  if (!kThreadSanitizer) {
    GTEST_SKIP() << "needs --config=tsan (a race is only reported by TSan)";
  }
  const std::string dir = NewTempDir("race");
  std::unique_ptr<Subprocess> child = StartChild("race", dir);
  ExitInfo e;
  EXPECT_NONFATAL_FAILURE(e = child->Wait(60), "WARNING: ThreadSanitizer: data race");
  EXPECT_EQ(e.exit_code, 66);  // halt_on_error's exit code
}

TEST(SubprocessTest, WaitsAreScaledUnderThreadSanitizerOnly) {
  if (kThreadSanitizer) {
    // The tsan config sets LOCKSTEP_TEST_SLOWDOWN (.bazelrc).
    EXPECT_GE(Slowdown(), 3.0);
  } else if (std::getenv("LOCKSTEP_TEST_SLOWDOWN") == nullptr) {
    EXPECT_EQ(Slowdown(), 1.0);
  }
  EXPECT_EQ(Scaled(2.5), 2.5 * Slowdown());
}

}  // namespace
}  // namespace testing
}  // namespace lockstep
