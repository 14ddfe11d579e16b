// Subprocess control for multi-process tests.
#include "tests/subprocess.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"

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

// This process's environment for a child, with `report_prefix` as the
// ThreadSanitizer log_path when TSAN_OPTIONS is set (a later option wins).
std::vector<std::string> ChildEnvironment(const std::string& report_prefix) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string var(*e);
    if (!report_prefix.empty() && var.rfind("TSAN_OPTIONS=", 0) == 0) {
      var += ":log_path=" + report_prefix;
    }
    env.push_back(std::move(var));
  }
  return env;
}

}  // namespace

double Slowdown() {
  static const double factor = [] {
    const char* v = std::getenv("LOCKSTEP_TEST_SLOWDOWN");
    const double f = v == nullptr ? 1.0 : std::atof(v);
    return f >= 1.0 ? f : 1.0;
  }();
  return factor;
}

Subprocess::Subprocess(std::vector<std::string> argv,
                       const std::string& log_dir) {
  const int id = g_counter++;
  out_path_ = log_dir + "/proc" + std::to_string(id) + ".out";
  err_path_ = log_dir + "/proc" + std::to_string(id) + ".err";
  if (std::getenv("TSAN_OPTIONS") != nullptr) {
    report_prefix_ = log_dir + "/proc" + std::to_string(id) + ".tsan";
  }
  std::vector<std::string> env = ChildEnvironment(report_prefix_);
  std::vector<char*> cenv;
  for (std::string& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
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
                  cenv.data()) != 0) {
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
  const double deadline = Now() + Scaled(timeout_s);
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_.exited = true;
      if (WIFEXITED(status)) exit_.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) exit_.term_signal = WTERMSIG(status);
      CheckSanitizerReports();
      return exit_;
    }
    if (Now() >= deadline) return exit_;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void Subprocess::CheckSanitizerReports() {
  if (report_prefix_.empty()) return;
  const size_t slash = report_prefix_.rfind('/');
  const std::string dir = report_prefix_.substr(0, slash);
  const std::string stem = report_prefix_.substr(slash + 1) + ".";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> reports;
  while (dirent* e = readdir(d)) {
    if (std::string(e->d_name).rfind(stem, 0) == 0) {
      reports.push_back(dir + "/" + e->d_name);
    }
  }
  closedir(d);
  for (const std::string& path : reports) {
    const std::string text = ReadFileOrEmpty(path);
    ADD_FAILURE() << "ThreadSanitizer report from pid " << pid_ << " (" << path
                  << ", " << text.size() << " bytes):\n"
                  << text.substr(0, 6000);
  }
}

void Subprocess::Signal(int sig) {
  if (pid_ > 0 && !exit_.exited) kill(pid_, sig);
}

std::string Subprocess::Stdout() const { return ReadFileOrEmpty(out_path_); }
std::string Subprocess::Stderr() const { return ReadFileOrEmpty(err_path_); }

bool Subprocess::WaitForOutput(const std::string& needle, double timeout_s) {
  const double deadline = Now() + Scaled(timeout_s);
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

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
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

std::string BrownDir() {
  const char* dir = std::getenv("LOCKSTEP_BROWN_DIR");
  if (dir == nullptr || *dir == '\0' ||
      ReadFileOrEmpty(std::string(dir) + "/valid.txt").empty() ||
      ReadFileOrEmpty(std::string(dir) + "/train.txt").empty()) {
    return "";
  }
  return dir;
}

std::string BrownMissing() {
  return "the Brown corpus not found: set LOCKSTEP_BROWN_DIR to a folder "
         "with its train.txt and valid.txt (scripts/test.sh uses "
         "../shared/datasets/brown when present)";
}

std::string MnistMissing() {
  return "real MNIST not found: set LOCKSTEP_MNIST_DIR to a folder with the "
         "four IDX .gz files (scripts/test.sh uses ../shared/datasets/mnist "
         "when present)";
}

}  // namespace testing
}  // namespace lockstep
