// A coordinator address as every verb reads it (--coordinator,
// $LOCKSTEP_COORDINATOR; the Python client's normalize_address is the
// same): "host:port", "host" (port 7070), "[v6]:port"; "http://" or
// "grpc://" in front is dropped, TLS's schemes and any other are refused
// (TLS is --tls-ca, not a scheme).
#ifndef LOCKSTEP_CLIENT_COORDINATOR_ADDRESS_H_
#define LOCKSTEP_CLIENT_COORDINATOR_ADDRESS_H_

#include <string>

#include "absl/status/statusor.h"

namespace lockstep {

inline constexpr int kDefaultCoordinatorPort = 7070;

// "host:port"; InvalidArgument saying what is wrong.
absl::StatusOr<std::string> NormalizeCoordinatorAddress(
    const std::string& address);
// "a,b,c" (coordinators in standby behind an etcd lease): each one
// normalized, comma-separated; the error names the entry.
absl::StatusOr<std::string> NormalizeCoordinatorAddresses(
    const std::string& list);

}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_COORDINATOR_ADDRESS_H_
