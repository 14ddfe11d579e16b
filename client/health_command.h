// `lockstep health HOST:PORT`: asks a daemon's grpc.health.v1 service, for
// scripts, container health checks and people (Kubernetes probes speak the
// protocol themselves).
#ifndef LOCKSTEP_CLIENT_HEALTH_COMMAND_H_
#define LOCKSTEP_CLIENT_HEALTH_COMMAND_H_

#include <string>
#include <vector>

namespace lockstep {

// Prints the status ("SERVING", "NOT_SERVING"); exit 0 only for SERVING, 1
// otherwise or when the daemon cannot be asked, 2 for usage errors.
int RunHealthCommand(const std::vector<std::string>& args);

}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_HEALTH_COMMAND_H_
