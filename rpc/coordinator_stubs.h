// The coordinators a worker knows (--coordinator a,b,c: several in standby
// behind an etcd lease, DESIGN "Coordinator high availability"). Calls go
// to the one that answered last; a call answered UNAVAILABLE (down,
// replaying its journal, a standby naming the leader) or not at all
// (DEADLINE_EXCEEDED: a paused one) moves the calls after it to the next
// address, so the retries every coordinator call
// already makes while a coordinator restarts find the new leader; with
// several, a connection whose pings go unanswered for 2 s is dropped. With
// one address nothing changes.
#ifndef LOCKSTEP_RPC_COORDINATOR_STUBS_H_
#define LOCKSTEP_RPC_COORDINATOR_STUBS_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/cluster.grpc.pb.h"
#include "rpc/tls.h"

namespace lockstep {

class CoordinatorStubs {
 public:
  using Stub = lockstep::v1::Coordinator::Stub;
  // `addresses`: at least one "host:port".
  CoordinatorStubs(const std::vector<std::string>& addresses,
                   const TlsFiles& tls);

  // The current coordinator's stub and address.
  Stub* get() const { return stubs_[current_.load()].get(); }
  const std::string& address() const { return addresses_[current_.load()]; }
  // How many coordinators it knows.
  size_t size() const { return addresses_.size(); }
  // How long a call on the training path (a progress report, a sample
  // record) may wait for an answer: 30 s from the one coordinator; with
  // several, 5 s, so that one that is paused (it accepts connections and
  // answers nothing) holds the ranks back no longer before the next is
  // asked.
  std::chrono::seconds StepCallTimeout() const {
    return std::chrono::seconds(addresses_.size() > 1 ? 5 : 30);
  }

  // Runs `call` on the current stub; when it ends UNAVAILABLE or
  // DEADLINE_EXCEEDED and that stub is still the current one, the next
  // call goes to the next address.
  template <typename Call>
  absl::Status Run(Call&& call) {
    const int used = current_.load();
    absl::Status s = call(stubs_[used].get());
    if ((absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) &&
        addresses_.size() > 1) {
      int expected = used;
      current_.compare_exchange_strong(
          expected, (used + 1) % static_cast<int>(addresses_.size()));
    }
    return s;
  }

 private:
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<Stub>> stubs_;
  std::atomic<int> current_{0};
};

}  // namespace lockstep

#endif  // LOCKSTEP_RPC_COORDINATOR_STUBS_H_
