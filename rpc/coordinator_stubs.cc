#include "rpc/coordinator_stubs.h"

#include "rpc/rpc_util.h"

namespace lockstep {

CoordinatorStubs::CoordinatorStubs(const std::vector<std::string>& addresses,
                                   const TlsFiles& tls)
    : addresses_(addresses) {
  // With several, a paused one (it accepts connections and answers
  // nothing) must be given up within seconds, calls in flight included (a
  // checkpoint upload waits for its answer up to 10 minutes): a ping every
  // 2 s, the connection dead after 2 s without an answer.
  const bool several = addresses_.size() > 1;
  for (const std::string& address : addresses_) {
    stubs_.push_back(lockstep::v1::Coordinator::NewStub(
        several ? MakeChannel(address, tls, 0, 2000, 2000)
                : MakeChannel(address, tls)));
  }
}

}  // namespace lockstep
