// The host of a listen or dial address, as the servers and checks read it.
#ifndef LOCKSTEP_RPC_HOST_PORT_H_
#define LOCKSTEP_RPC_HOST_PORT_H_

#include <string>

namespace lockstep {

// The host of "HOST:PORT" or "[V6]:PORT" without the brackets ("::1");
// the whole text, unbracketed, when it has no port.
inline std::string HostOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  std::string host = colon == std::string::npos || address.back() == ']'
                         ? address
                         : address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host;
}

}  // namespace lockstep

#endif  // LOCKSTEP_RPC_HOST_PORT_H_
