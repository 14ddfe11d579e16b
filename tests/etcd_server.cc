#include "tests/etcd_server.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace lockstep {
namespace testing {

std::string EtcdMissing() {
  if (access("/usr/bin/etcd", X_OK) != 0 ||
      access("/usr/bin/etcdctl", X_OK) != 0) {
    return "etcd is not installed (Debian's etcd-server and etcd-client; "
           "scripts/install_deps.sh --test installs them)";
  }
  return "";
}

EtcdCluster::EtcdCluster(int members, const std::string& dir,
                         const EtcdPlacement& placement)
    : dir_(dir), placement_(placement) {
  mkdir(dir.c_str(), 0755);  // may exist
  std::vector<std::string> peer_urls;
  std::string initial;
  for (int i = 0; i < members; ++i) {
    const bool placed = i < static_cast<int>(placement.hosts.size());
    const std::string host = placed ? placement.hosts[i] : "127.0.0.1";
    const int client = placed ? 2379 : FreePort();
    const int peer = placed ? 2380 : FreePort();
    if (client <= 0 || peer <= 0 || client == peer) {
      error_ = "no free port for etcd";
      return;
    }
    client_urls_.push_back("http://" + host + ":" + std::to_string(client));
    peer_urls.push_back("http://" + host + ":" + std::to_string(peer));
    initial +=
        (i ? "," : "") + ("e" + std::to_string(i)) + "=" + peer_urls.back();
  }
  for (int i = 0; i < members; ++i) {
    const std::string name = "e" + std::to_string(i);
    const std::string data = dir + "/" + name;
    members_.push_back(std::make_unique<Subprocess>(
        Wrap(i,
             std::vector<std::string>{
                 "/usr/bin/etcd", "--name", name, "--data-dir", data,
                 "--listen-client-urls", client_urls_[i],
                 "--advertise-client-urls", client_urls_[i],
                 "--listen-peer-urls", peer_urls[i],
                 "--initial-advertise-peer-urls", peer_urls[i],
                 "--initial-cluster", initial, "--initial-cluster-state", "new",
                 "--initial-cluster-token", "lockstep-test",
                 // Elections in a few hundred ms on one machine.
                 "--heartbeat-interval", "50", "--election-timeout", "500"}),
        dir));
  }
  if (!WaitHealthy(Endpoints(), 30)) {
    error_ = "etcd did not become healthy in 30 s: " +
             members_[0]->Stderr().substr(0, 2000);
  }
}

std::string EtcdCluster::Endpoints() const {
  std::string all;
  for (size_t i = 0; i < client_urls_.size(); ++i) {
    all += (i ? "," : "") + client_urls_[i];
  }
  return all;
}

void EtcdCluster::Kill(int i) {
  members_[i]->Signal(SIGKILL);
  members_[i]->Wait(10);
}

bool EtcdCluster::WaitHealthy(const std::string& endpoints, double timeout_s) {
  const auto until =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(Scaled(timeout_s) * 1000));
  while (std::chrono::steady_clock::now() < until) {
    RunResult r =
        RunProcess(Wrap(0, {"/usr/bin/etcdctl", "--endpoints", endpoints,
                            "--command-timeout=2s", "endpoint", "health"}),
                   dir_, 10);
    if (r.exit.exited && r.exit.exit_code == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

}  // namespace testing
}  // namespace lockstep
