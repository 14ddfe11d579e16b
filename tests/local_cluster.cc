// LocalCluster: the coordinator and workers of a multi-process test.
#include "tests/local_cluster.h"

#include <unistd.h>

namespace lockstep {
namespace testing {

LocalCluster::LocalCluster(const std::string& dir,
                           const std::vector<std::string>& extra_args)
    : dir_(dir), storage_(dir + "/storage") {
  std::vector<std::string> argv = {Runfile("client/lockstep"),
                                   "coordinator",
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--storage",
                                   storage_,
                                   "--address-file",
                                   dir_ + "/address"};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  coordinator_ = std::make_unique<Subprocess>(argv, dir_);
  for (int i = 0; i < Scaled(200) && address_.empty(); ++i) {
    std::string a = ReadFileOrEmpty(dir_ + "/address");
    if (!a.empty() && a.back() == '\n') address_ = a.substr(0, a.size() - 1);
    if (address_.empty()) usleep(50000);
  }
}

bool LocalCluster::RestartCoordinator(
    const std::vector<std::string>& extra_args) {
  std::vector<std::string> argv = {Runfile("client/lockstep"),
                                   "coordinator",
                                   "--listen",
                                   address_,
                                   "--storage",
                                   storage_,
                                   "--address-file",
                                   dir_ + "/address2"};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  unlink((dir_ + "/address2").c_str());
  old_coordinators_.push_back(std::move(coordinator_));
  coordinator_ = std::make_unique<Subprocess>(argv, dir_);
  for (int i = 0; i < Scaled(200); ++i) {
    if (!ReadFileOrEmpty(dir_ + "/address2").empty()) return true;
    usleep(50000);
  }
  return false;
}

bool LocalCluster::StartWorkers(int n, int replicas, int threads,
                                std::string* why,
                                const std::vector<std::string>& extra_args) {
  const size_t first = workers_.size();
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> argv = {Runfile("client/lockstep"),
                                     "worker",
                                     "--coordinator",
                                     address_,
                                     "--replicas",
                                     std::to_string(replicas),
                                     "--threads",
                                     std::to_string(threads)};
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    workers_.push_back(std::make_unique<Subprocess>(argv, dir_));
  }
  for (size_t i = first; i < workers_.size(); ++i) {
    if (!workers_[i]->WaitForOutput("registered with", 30)) {
      *why = workers_[i]->Stdout() + workers_[i]->Stderr();
      return false;
    }
  }
  return true;
}

RunResult LocalCluster::Client(std::vector<std::string> args,
                               double timeout_s) {
  std::vector<std::string> argv = {Runfile("client/lockstep")};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--coordinator");
  argv.push_back(address_);
  return RunProcess(argv, dir_, timeout_s);
}

}  // namespace testing
}  // namespace lockstep
