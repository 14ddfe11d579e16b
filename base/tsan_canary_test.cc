// ThreadSanitizer's own canary, for --config=tsan: a counter one thread
// adds to without the lock is reported as a data race (the suppressions in
// third_party/tsan/suppressions.txt leave lockstep's races alone), and the
// same counter guarded by absl::Mutex on both sides is not (TSan sees
// absl::Mutex, which it does only with the Abseil of
// scripts/tsan_abseil.sh). Each case runs the race in a child process: this
// binary again, with LOCKSTEP_TSAN_CANARY set. Without TSan both skip.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif

absl::Mutex mu;
long counter = 0;

__attribute__((noinline)) void AddToCounter(bool locked) {
  if (locked) {
    absl::MutexLock lock(&mu);
    ++counter;
  } else {
    ++counter;
  }
}

// A second thread always locks; this one locks only when `both_locked`.
void Race(bool both_locked) {
  std::thread other([] {
    for (int i = 0; i < 2000; ++i) AddToCounter(true);
  });
  for (int i = 0; i < 2000; ++i) AddToCounter(both_locked);
  other.join();
}

// The child: races as told and exits before any test runs (TSan's
// halt_on_error exits it with 66 at the first report).
const bool kChild = [] {
  const char* mode = std::getenv("LOCKSTEP_TSAN_CANARY");
  if (mode == nullptr) return false;
  Race(std::string(mode) == "locked");
  std::fflush(stdout);
  std::_Exit(0);
}();

struct Child {
  int exit_code = -1;
  std::string out;
};

Child RunChild(const std::string& mode) {
  Child c;
  // This binary's own path (in the shell, /proc/self/exe is the shell).
  std::array<char, 4096> self{};
  if (readlink("/proc/self/exe", self.data(), self.size() - 1) <= 0) return c;
  const std::string cmd = "LOCKSTEP_TSAN_CANARY=" + mode + " '" +
                          std::string(self.data()) + "' 2>&1 </dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return c;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) c.out.append(buf.data(), n);
  const int status = pclose(p);
  if (WIFEXITED(status)) c.exit_code = WEXITSTATUS(status);
  return c;
}

constexpr char kSkip[] =
    "a ThreadSanitizer check: runs under bazel test --config=tsan (after "
    "scripts/tsan_abseil.sh), docs/testing.md";

TEST(TsanCanaryTest, AnUnguardedCounterIsReportedAsADataRace) {
  if (!kThreadSanitizer) GTEST_SKIP() << kSkip;
  const Child c = RunChild("unlocked");
  EXPECT_NE(c.exit_code, 0) << c.out;
  EXPECT_NE(c.out.find("WARNING: ThreadSanitizer: data race"),
            std::string::npos)
      << c.out;
  EXPECT_NE(c.out.find("AddToCounter"), std::string::npos) << c.out;
}

TEST(TsanCanaryTest, ACounterGuardedByAbslMutexIsNot) {
  if (!kThreadSanitizer) GTEST_SKIP() << kSkip;
  const Child c = RunChild("locked");
  EXPECT_EQ(c.exit_code, 0)
      << "TSan does not see absl::Mutex: is the binary's DT_RPATH the Abseil "
         "of scripts/tsan_abseil.sh (third_party/tsan/abseil/tsan.bazelrc)?\n"
      << c.out;
  EXPECT_EQ(c.out.find("ThreadSanitizer"), std::string::npos) << c.out;
}

}  // namespace
}  // namespace lockstep
