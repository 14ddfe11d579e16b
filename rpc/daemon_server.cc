// The daemons' gRPC servers (see daemon_server.h).
#include "rpc/daemon_server.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "rpc/listen_check.h"
#include "rpc/rpc_util.h"

namespace lockstep {

absl::StatusOr<StartedServer> StartServer(
    const std::string& flag, const std::string& listen,
    std::shared_ptr<grpc::ServerCredentials> credentials,
    const std::vector<grpc::Service*>& services) {
  RETURN_IF_ERROR(CheckListenAddress(flag, listen));
  grpc::ServerBuilder builder;
  ConfigureServer(builder);
  StartedServer s;
  builder.AddListeningPort(listen, std::move(credentials), &s.port);
  for (grpc::Service* service : services) builder.RegisterService(service);
  s.server = builder.BuildAndStart();
  if (s.server == nullptr || s.port == 0) {
    return absl::UnavailableError(
        absl::StrCat(flag, " ", listen,
                     ": cannot listen there (in use or not a local address?)"));
  }
  s.address = absl::StrCat(listen.substr(0, listen.rfind(':')), ":", s.port);
  return s;
}

absl::StatusOr<std::unique_ptr<DaemonServer>> DaemonServer::Start(
    const DaemonServerOptions& options,
    const std::vector<grpc::Service*>& services, HealthService* health) {
  std::unique_ptr<DaemonServer> d(new DaemonServer());
  std::vector<grpc::Service*> all = services;
  all.push_back(health);
  ASSIGN_OR_RETURN(
      d->main_, StartServer("--listen", options.listen,
                            MakeServerCredentials(options.tls,
                                                  options.client_certificates),
                            all));
  if (!options.health_listen.empty()) {
    // Plaintext: Kubernetes' gRPC probes cannot speak TLS.
    ASSIGN_OR_RETURN(d->health_,
                     StartServer("--health-listen", options.health_listen,
                                 grpc::InsecureServerCredentials(), {health}));
  }
  return d;
}

void DaemonServer::Shutdown() {
  const auto now = std::chrono::system_clock::now();
  if (health_.server != nullptr) {
    health_.server->Shutdown(now + std::chrono::seconds(1));
    health_.server.reset();
  }
  if (main_.server != nullptr) {
    main_.server->Shutdown(now + std::chrono::seconds(2));
    main_.server.reset();
  }
}

}  // namespace lockstep
