// A real local cluster for multi-process tests: `lockstep coordinator` on
// 127.0.0.1 with a free port and N `lockstep worker` processes, plus client
// calls against it. Every wait is bounded; processes die with the object.
#ifndef LOCKSTEP_TESTS_LOCAL_CLUSTER_H_
#define LOCKSTEP_TESTS_LOCAL_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "tests/subprocess.h"

namespace lockstep {
namespace testing {

class LocalCluster {
 public:
  // Starts the coordinator with storage under `dir` and `extra_args` (TLS
  // flags, say); ok() says whether it came up (its stderr is in error()).
  explicit LocalCluster(const std::string& dir,
                        const std::vector<std::string>& extra_args = {});

  bool ok() const { return !address_.empty(); }
  std::string error() const { return coordinator_->Stderr(); }
  const std::string& address() const { return address_; }
  const std::string& storage() const { return storage_; }
  Subprocess& coordinator() { return *coordinator_; }
  Subprocess& worker(int i) { return *workers_[i]; }

  // Starts n workers (with `extra_args`) and waits until each has
  // registered; false (with the logs in *why) otherwise.
  bool StartWorkers(int n, int replicas, int threads, std::string* why,
                    const std::vector<std::string>& extra_args = {});
  // Starts a new coordinator on the same address and storage (after the
  // test killed the old one); true once it listens.
  bool RestartCoordinator(const std::vector<std::string>& extra_args = {});
  int num_workers() const { return static_cast<int>(workers_.size()); }
  // Runs `lockstep ARGS --coordinator ADDRESS`.
  RunResult Client(std::vector<std::string> args, double timeout_s = 120);

 private:
  std::string dir_, storage_, address_;
  std::unique_ptr<Subprocess> coordinator_;
  std::vector<std::unique_ptr<Subprocess>> old_coordinators_;
  std::vector<std::unique_ptr<Subprocess>> workers_;
};

}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_TESTS_LOCAL_CLUSTER_H_
