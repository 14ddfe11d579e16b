// Hosts for multi-host tests on one machine: Linux network namespaces, each
// with one interface (eth0, an address of a private /24 used only inside
// these namespaces) on a veth pair to a bridge that lives in a "switch"
// namespace of its own, so nothing touches the machine's own namespace.
// A host's link can be cut and healed (the switch side's veth down/up), and
// one direction between two hosts blackholed. Processes run in a host
// through `ip netns exec`, which execs them: their PID is the process's own.
// Everything is removed by name when the lab goes (the namespaces take
// their veths with them), and a lab left behind by a killed test process
// is removed by the next one. (The benchmarks' shaped links,
// benchmarks/bench_lib.sh's netns_up, build the same layout in shell.)
#ifndef LOCKSTEP_TESTS_NET_NETLAB_H_
#define LOCKSTEP_TESTS_NET_NETLAB_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/subprocess.h"

namespace lockstep {
namespace testing {

class NetLab {
 public:
  // Why namespaces cannot be made here ("" when they can): not root, or
  // the kernel refused (the message names the command). A drill skips.
  static std::string Unavailable();
  // As root, the tools a drill needs that are missing ("" when none is):
  // `ip` and `tc` (Debian's iproute2, which scripts/install_deps.sh
  // installs). A drill that could run fails instead of skipping.
  static std::string MissingTools();

  // `hosts` namespaces on one switch. ok() says whether it all came up
  // (error() the failing command and its output).
  explicit NetLab(int hosts);
  ~NetLab();
  NetLab(const NetLab&) = delete;
  NetLab& operator=(const NetLab&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  // Host i's address ("10.R.S.(i+2)").
  const std::string& address(int i) const { return addresses_[i]; }

  // argv run inside host i (prefixed with ip netns exec).
  std::vector<std::string> In(int i, std::vector<std::string> argv) const;

  // Host i's link goes down (nothing in or out; its TCP connections stay
  // open with nobody answering) or up again. False with error() on failure.
  bool Cut(int i);
  bool Heal(int i);
  // Host i's link carries at most `bits_per_second` each way (tbf on both
  // ends of its veth), as a slower NIC or a congested uplink would.
  bool Shape(int i, int64_t bits_per_second);
  // Packets from host i to host j vanish (a blackhole route in i), while
  // both still reach every other host: an asymmetric cut. Unblock undoes.
  bool Block(int i, int j);
  bool Unblock(int i, int j);

 private:
  bool Run(const std::vector<std::string>& argv);
  std::string prefix_, switch_ns_;
  std::vector<std::string> namespaces_, addresses_;
  std::string error_;
};

}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_TESTS_NET_NETLAB_H_
