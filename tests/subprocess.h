// Starting the real lockstep binary from tests: spawn with captured output,
// bounded waits, kill by PID. Every wait has a deadline; the destructor
// kills (SIGKILL) and reaps a process still running.
//
// Under a sanitizer (docs/testing.md) two things change, both here so
// that every multi-process test gets them: waits are multiplied by
// Slowdown(), and each process's ThreadSanitizer reports go to a file of
// its own (TSAN_OPTIONS log_path), which fails the running test when the
// process is reaped: a report that kills a worker in a fault drill (where a
// dead worker is expected) cannot pass for the drill's own fault.
#ifndef LOCKSTEP_TESTS_SUBPROCESS_H_
#define LOCKSTEP_TESTS_SUBPROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace lockstep {
namespace testing {

struct ExitInfo {
  bool exited = false;     // false: still running at the deadline
  int exit_code = -1;      // when it exited normally
  int term_signal = 0;     // when a signal ended it
};

class Subprocess {
 public:
  // Starts argv[0] with argv, stdout and stderr to files under `log_dir`.
  explicit Subprocess(std::vector<std::string> argv,
                      const std::string& log_dir);
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // Waits up to timeout_s (times Slowdown()); a process still running is
  // left running.
  ExitInfo Wait(double timeout_s);
  void Signal(int sig);
  std::string Stdout() const;
  std::string Stderr() const;
  // Polls stdout until it contains `needle` or timeout_s (times
  // Slowdown()) passes.
  bool WaitForOutput(const std::string& needle, double timeout_s);

 private:
  // Once the process is reaped: a test failure for each sanitizer report
  // file it (or a process it started) wrote.
  void CheckSanitizerReports();

  pid_t pid_ = -1;
  ExitInfo exit_;
  std::string out_path_, err_path_;
  std::string report_prefix_;  // TSAN_OPTIONS log_path; "" when not set
};

// How much slower than a plain build this test's processes run:
// $LOCKSTEP_TEST_SLOWDOWN (the tsan config in .bazelrc sets 10), else 1.
// Every bounded wait of the multi-process tests, and every timing goal
// they assert, is multiplied by it: a TSan build runs 3-10x slower, and a
// goal like "a lost worker is found within 3 s" is the protocol's timeout
// plus work that TSan slows. Protocol timeouts given to the daemons
// (--worker-timeout, a cut's length) are not: they are what is tested.
double Slowdown();
inline double Scaled(double seconds) { return seconds * Slowdown(); }

struct RunResult {
  ExitInfo exit;
  std::string out, err;
};
// Runs to completion (killing it past timeout_s times Slowdown(): exit.exited
// is then false).
RunResult RunProcess(const std::vector<std::string>& argv, const std::string& log_dir,
              double timeout_s);

// A TCP port of 127.0.0.1 nothing listens on now (bound, read, closed), for
// daemons that cannot bind port 0 themselves (etcd); -1 when none.
int FreePort();

// Path of a runfile ("client/lockstep") of this workspace.
std::string Runfile(const std::string& relative);
// A fresh empty directory under $TEST_TMPDIR.
std::string NewTempDir(const std::string& name);
std::string ReadFileOrEmpty(const std::string& path);
void WriteStringToFile(const std::string& path, const std::string& content);
// $LOCKSTEP_MNIST_DIR when it holds the MNIST IDX .gz files; else "" (the
// tests that need real MNIST skip with MnistMissing()'s reason).
std::string MnistDir();
std::string MnistMissing();
// $LOCKSTEP_BROWN_DIR when it holds the Brown corpus' train.txt and
// valid.txt; else "" (the tests that need it skip with BrownMissing()).
std::string BrownDir();
std::string BrownMissing();

}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_TESTS_SUBPROCESS_H_
