// The gRPC side of both daemons (coordinator and worker): their services
// and the health service on --listen (TLS when configured), and the
// plaintext health server for Kubernetes' probes on --health-listen.
#ifndef LOCKSTEP_RPC_DAEMON_SERVER_H_
#define LOCKSTEP_RPC_DAEMON_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "rpc/health_service.h"
#include "rpc/tls.h"

namespace lockstep {

// A server of `services` (not owned) on `listen` with `credentials`.
// Unavailable naming `flag` and the address when it cannot bind.
struct StartedServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::string address;  // "host:port" with the bound port
};
absl::StatusOr<StartedServer> StartServer(
    const std::string& flag, const std::string& listen,
    std::shared_ptr<grpc::ServerCredentials> credentials,
    const std::vector<grpc::Service*>& services);

struct DaemonServerOptions {
  std::string listen;  // --listen; port 0: a free one
  TlsFiles tls;        // off: plaintext
  ClientCertificates client_certificates =
      ClientCertificates::kRequestAndVerify;
  std::string health_listen;  // --health-listen; "": none
};

class DaemonServer {
 public:
  // `services` and `health` are not owned and must outlive the server;
  // health is served on both servers.
  static absl::StatusOr<std::unique_ptr<DaemonServer>> Start(
      const DaemonServerOptions& options,
      const std::vector<grpc::Service*>& services, HealthService* health);
  ~DaemonServer() { Shutdown(); }

  int port() const { return main_.port; }
  // --listen's host with the bound port.
  const std::string& address() const { return main_.address; }
  // "" without --health-listen.
  const std::string& health_address() const { return health_.address; }
  // Stops both servers (the health one first); calls in flight get two
  // seconds. Idempotent.
  void Shutdown();

 private:
  DaemonServer() = default;
  StartedServer main_, health_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_RPC_DAEMON_SERVER_H_
