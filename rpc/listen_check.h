// Why a daemon cannot listen where it was told, said before its server
// tries: gRPC's own failure is a raw log line and "no address added".
#ifndef LOCKSTEP_RPC_LISTEN_CHECK_H_
#define LOCKSTEP_RPC_LISTEN_CHECK_H_

#include <string>

#include "absl/status/status.h"

namespace lockstep {

// Binds (and closes) a socket at `listen` ("HOST:PORT", "[V6]:PORT") the
// way the servers do (SO_REUSEADDR, no SO_REUSEPORT): OK when one of the
// addresses HOST resolves to can be bound (PORT 0: any free port); otherwise
// Unavailable naming `flag`, `listen` and the cause: the port in use, a
// host that is not an address of this machine, a privileged port, a host
// that does not resolve. A text that is not HOST:PORT is left to the
// server (OK).
absl::Status CheckListenAddress(const std::string& flag,
                                const std::string& listen);

}  // namespace lockstep

#endif  // LOCKSTEP_RPC_LISTEN_CHECK_H_
