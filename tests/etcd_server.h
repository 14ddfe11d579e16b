// A real etcd (Debian's etcd-server) started by a test: one member or a
// cluster of several, on free ports of 127.0.0.1, its data in a folder of
// the test's, each member a Subprocess killed by PID.
#ifndef LOCKSTEP_TESTS_ETCD_SERVER_H_
#define LOCKSTEP_TESTS_ETCD_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tests/subprocess.h"

namespace lockstep {
namespace testing {

// "" when /usr/bin/etcd and /usr/bin/etcdctl are there; else why the
// test skips.
std::string EtcdMissing();

// Where the members run: by default on 127.0.0.1 with free ports; for a
// network drill, member i on hosts[i] (ports 2379 and 2380) with its argv
// (and etcdctl's, as member 0's) passed through wrap(i, argv) (`ip netns
// exec`).
struct EtcdPlacement {
  std::vector<std::string> hosts;
  std::function<std::vector<std::string>(int, std::vector<std::string>)> wrap;
};

class EtcdCluster {
 public:
  // Starts `members` members under `dir` and waits (up to 30 s) until
  // every one reports healthy; ok() says whether it did, error() why not.
  EtcdCluster(int members, const std::string& dir,
              const EtcdPlacement& placement = {});
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  // "http://127.0.0.1:P" of member i; every member's, comma-separated.
  const std::string& Endpoint(int i) const { return client_urls_[i]; }
  std::string Endpoints() const;
  int size() const { return static_cast<int>(members_.size()); }
  Subprocess& member(int i) { return *members_[i]; }
  // SIGKILL member i and reap it.
  void Kill(int i);
  // True once `endpoints` answer `etcdctl endpoint health` (timeout_s
  // times Slowdown()).
  bool WaitHealthy(const std::string& endpoints, double timeout_s);

 private:
  std::vector<std::string> Wrap(int member,
                                std::vector<std::string> argv) const {
    return placement_.wrap ? placement_.wrap(member, std::move(argv)) : argv;
  }

  std::string dir_, error_;
  EtcdPlacement placement_;
  std::vector<std::string> client_urls_;
  std::vector<std::unique_ptr<Subprocess>> members_;
};

}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_TESTS_ETCD_SERVER_H_
