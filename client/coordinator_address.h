// Addresses as the verbs read them. A coordinator address as every verb reads
// it (--coordinator, $LOCKSTEP_COORDINATOR; the Python client's
// normalize_address is the same): "host:port", "host" (port 7070), "[v6]:port";
// "http://" or "grpc://" in front is dropped, TLS's schemes and any other are
// refused (TLS is --tls-ca, not a scheme).
#ifndef LOCKSTEP_CLIENT_COORDINATOR_ADDRESS_H_
#define LOCKSTEP_CLIENT_COORDINATOR_ADDRESS_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace lockstep {

inline constexpr int kDefaultCoordinatorPort = 7070;

// A host and, when given, a port: "host:port", "host", "[v6]:port", "[v6]",
// or a bare v6 address (bracketed in `host`).
struct HostPort {
  std::string host;
  std::optional<int> port;
  // "host:port", with `default_port` when none was given.
  std::string With(int default_port) const;
};

// `text` (surrounding spaces dropped) as a HostPort, the port from
// `min_port` to 65535 (0: any free one, where a daemon binds).
// InvalidArgument "WHAT: why" (a missing host, a bad port, an unclosed [).
absl::StatusOr<HostPort> ParseHostPort(const std::string& text,
                                       const std::string& what, int min_port);

// "host:port"; InvalidArgument saying what is wrong.
absl::StatusOr<std::string> NormalizeCoordinatorAddress(
    const std::string& address);
// "a,b,c" (coordinators in standby behind an etcd lease): each one
// normalized, comma-separated; the error names the entry.
absl::StatusOr<std::string> NormalizeCoordinatorAddresses(
    const std::string& list);

}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_COORDINATOR_ADDRESS_H_
