#include "tests/net/netlab.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace lockstep {
namespace testing {
namespace {

constexpr char kPrefix[] = "lsnet";

std::string Ip() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

std::string Tc() {
  for (const char* p : {"/usr/sbin/tc", "/sbin/tc", "/usr/bin/tc"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

RunResult Quiet(const std::vector<std::string>& argv) {
  static const std::string* dir = new std::string(NewTempDir("netlab"));
  return RunProcess(argv, *dir, 30);
}

// Namespaces of labs whose test process is gone (killed before its
// destructor ran).
void RemoveStaleLabs(const std::string& ip) {
  RunResult r = Quiet({ip, "netns", "list"});
  for (absl::string_view line : absl::StrSplit(r.out, '\n')) {
    const std::string name(line.substr(0, line.find(' ')));
    if (!absl::StartsWith(name, kPrefix)) continue;
    const std::string digits =
        name.substr(sizeof(kPrefix) - 1, name.find('-') - (sizeof(kPrefix) - 1));
    int pid = 0;
    if (!absl::SimpleAtoi(digits, &pid) || pid <= 1) continue;
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;
    Quiet({ip, "netns", "del", name});
  }
}

}  // namespace

std::string NetLab::Unavailable() {
  if (geteuid() != 0) {
    return "network namespaces need root (ip netns add); run the suite as "
           "root, as CI does";
  }
  const std::string ip = Ip();
  if (ip.empty()) return "no `ip` command (Debian package iproute2)";
  // (MissingTools, checked first by a drill, fails it as root.)
  const std::string probe = absl::StrCat(kPrefix, getpid(), "-probe");
  RunResult r = Quiet({ip, "netns", "add", probe});
  if (r.exit.exit_code != 0) {
    return absl::StrCat("`ip netns add` failed here: ", r.err);
  }
  Quiet({ip, "netns", "del", probe});
  return "";
}

std::string NetLab::MissingTools() {
  if (geteuid() != 0) return "";  // Unavailable() says why it skips
  std::vector<std::string> missing;
  if (Ip().empty()) missing.push_back("`ip`");
  if (Tc().empty()) missing.push_back("`tc`");
  if (missing.empty()) return "";
  return absl::StrCat(absl::StrJoin(missing, " and "),
                      " missing in /usr/sbin, /sbin and /usr/bin: install "
                      "Debian's iproute2 (scripts/install_deps.sh --test "
                      "does); a drill that can run as root does not skip "
                      "for a missing tool");
}

NetLab::NetLab(int hosts) {
  const std::string ip = Ip();
  if (ip.empty()) {
    error_ = "no `ip` command";
    return;
  }
  RemoveStaleLabs(ip);
  static std::atomic<int> labs{0};
  prefix_ = absl::StrCat(kPrefix, getpid(), "-", labs++);
  switch_ns_ = prefix_ + "-sw";
  if (!Run({ip, "netns", "add", switch_ns_}) ||
      !Run({ip, "-n", switch_ns_, "link", "add", "br0", "type", "bridge"}) ||
      !Run({ip, "-n", switch_ns_, "link", "set", "br0", "up"})) {
    return;
  }
  for (int i = 0; i < hosts; ++i) {
    const std::string ns = absl::StrCat(prefix_, "-h", i);
    const std::string veth = absl::StrCat("v", i);
    const std::string address = absl::StrCat("10.213.0.", i + 2);
    namespaces_.push_back(ns);
    addresses_.push_back(address);
    if (!Run({ip, "netns", "add", ns}) ||
        !Run({ip, "-n", switch_ns_, "link", "add", veth, "type", "veth",
              "peer", "name", "eth0", "netns", ns}) ||
        !Run({ip, "-n", switch_ns_, "link", "set", veth, "master", "br0"}) ||
        !Run({ip, "-n", switch_ns_, "link", "set", veth, "up"}) ||
        !Run({ip, "-n", ns, "addr", "add", address + "/24", "dev", "eth0"}) ||
        !Run({ip, "-n", ns, "link", "set", "eth0", "up"}) ||
        !Run({ip, "-n", ns, "link", "set", "lo", "up"})) {
      return;
    }
  }
}

NetLab::~NetLab() {
  const std::string ip = Ip();
  for (const std::string& ns : namespaces_) Quiet({ip, "netns", "del", ns});
  if (!switch_ns_.empty()) Quiet({ip, "netns", "del", switch_ns_});
}

bool NetLab::Run(const std::vector<std::string>& argv) {
  RunResult r = Quiet(argv);
  if (r.exit.exit_code == 0) return true;
  error_ = absl::StrCat("`", absl::StrJoin(argv, " "), "` failed (",
                        r.exit.exit_code, "): ", r.err, r.out);
  return false;
}

std::vector<std::string> NetLab::In(int i, std::vector<std::string> argv) const {
  std::vector<std::string> out = {Ip(), "netns", "exec", namespaces_[i]};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

bool NetLab::Cut(int i) {
  return Run({Ip(), "-n", switch_ns_, "link", "set", absl::StrCat("v", i),
              "down"});
}

bool NetLab::Heal(int i) {
  return Run({Ip(), "-n", switch_ns_, "link", "set", absl::StrCat("v", i),
              "up"});
}

bool NetLab::Shape(int i, int64_t bits_per_second) {
  // tbf's bucket must hold a timer tick of traffic (HZ may be 100), as in
  // benchmarks/bench_lib.sh's netns_up.
  const int64_t burst = std::max<int64_t>(65536, bits_per_second / 8 / 100);
  const std::vector<std::string> tbf = {
      "root",  "tbf", "rate",
      absl::StrCat(bits_per_second, "bit"), "burst", absl::StrCat(burst),
      "latency", "50ms"};
  std::vector<std::string> out = {Tc(), "-n", switch_ns_, "qdisc", "add",
                                  "dev", absl::StrCat("v", i)};
  std::vector<std::string> in = {Tc(), "-n", namespaces_[i], "qdisc", "add",
                                 "dev", "eth0"};
  out.insert(out.end(), tbf.begin(), tbf.end());
  in.insert(in.end(), tbf.begin(), tbf.end());
  return Run(out) && Run(in);
}

bool NetLab::Block(int i, int j) {
  return Run({Ip(), "-n", namespaces_[i], "route", "add", "blackhole",
              addresses_[j] + "/32"});
}

bool NetLab::Unblock(int i, int j) {
  return Run({Ip(), "-n", namespaces_[i], "route", "del", "blackhole",
              addresses_[j] + "/32"});
}

}  // namespace testing
}  // namespace lockstep
