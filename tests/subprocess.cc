// Subprocess control for multi-process tests.
#include "tests/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace lockstep {
namespace testing {
namespace {

std::atomic<int> g_counter{0};

double Now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Subprocess::Subprocess(std::vector<std::string> argv,
                       const std::string& log_dir) {
  const int id = g_counter++;
  out_path_ = log_dir + "/proc" + std::to_string(id) + ".out";
  err_path_ = log_dir + "/proc" + std::to_string(id) + ".err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  if (posix_spawn(&pid_, cargv[0], &actions, nullptr, cargv.data(),
                  environ) != 0) {
    pid_ = -1;
    exit_.exited = true;
    exit_.exit_code = 127;
  }
  posix_spawn_file_actions_destroy(&actions);
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !exit_.exited) {
    kill(pid_, SIGKILL);
    Wait(10);
  }
}

ExitInfo Subprocess::Wait(double timeout_s) {
  if (exit_.exited || pid_ <= 0) return exit_;
  const double deadline = Now() + timeout_s;
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_.exited = true;
      if (WIFEXITED(status)) exit_.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) exit_.term_signal = WTERMSIG(status);
      return exit_;
    }
    if (Now() >= deadline) return exit_;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void Subprocess::Signal(int sig) {
  if (pid_ > 0 && !exit_.exited) kill(pid_, sig);
}

std::string Subprocess::Stdout() const { return ReadFileOrEmpty(out_path_); }
std::string Subprocess::Stderr() const { return ReadFileOrEmpty(err_path_); }

bool Subprocess::WaitForOutput(const std::string& needle, double timeout_s) {
  const double deadline = Now() + timeout_s;
  while (Now() < deadline) {
    if (Stdout().find(needle) != std::string::npos) return true;
    if (Wait(0).exited) return Stdout().find(needle) != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

RunResult RunProcess(const std::vector<std::string>& argv, const std::string& log_dir,
              double timeout_s) {
  Subprocess p(argv, log_dir);
  RunResult r;
  r.exit = p.Wait(timeout_s);
  if (!r.exit.exited) {
    p.Signal(SIGKILL);
    p.Wait(10);
  }
  r.out = p.Stdout();
  r.err = p.Stderr();
  return r;
}

std::string Runfile(const std::string& relative) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  return std::string(srcdir ? srcdir : ".") + "/" + (ws ? ws : "lockstep") +
         "/" + relative;
}

std::string NewTempDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string base = std::string(tmp ? tmp : "/tmp") + "/" + name + "." +
                     std::to_string(getpid()) + "." +
                     std::to_string(g_counter++);
  mkdir(base.c_str(), 0755);
  return base;
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteStringToFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

std::string MnistDir() {
  const char* dir = std::getenv("LOCKSTEP_MNIST_DIR");
  if (dir == nullptr || *dir == '\0' ||
      ReadFileOrEmpty(std::string(dir) + "/t10k-labels-idx1-ubyte.gz")
          .empty()) {
    return "";
  }
  return dir;
}

std::string MnistMissing() {
  return "real MNIST not found: set LOCKSTEP_MNIST_DIR to a folder with the "
         "four IDX .gz files (scripts/test.sh uses ../shared/datasets/mnist "
         "when present)";
}

}  // namespace testing
}  // namespace lockstep
