#include "rpc/coordinator_stubs.h"

#include "rpc/rpc_util.h"

namespace lockstep {

CoordinatorStubs::CoordinatorStubs(const std::vector<std::string>& addresses,
                                   const TlsFiles& tls)
    : addresses_(addresses) {
  for (const std::string& address : addresses_) {
    stubs_.push_back(
        lockstep::v1::Coordinator::NewStub(MakeChannel(address, tls)));
  }
}

}  // namespace lockstep
