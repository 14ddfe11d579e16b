// Coordinator server: bind, serve both services, tick, shut down cleanly.
#include "coordinator/server.h"

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "coordinator/ops_endpoints.h"
#include "coordinator/services.h"
#include "rpc/daemon_server.h"
#include "rpc/health_service.h"
#include "rpc/http_server.h"
#include "rpc/rpc_util.h"

namespace lockstep {

absl::Status RunCoordinator(const ServerOptions& options) {
  RETURN_IF_ERROR(AnnotateStatus(
      MakeDirs(JoinPath(options.coordinator.storage_dir, "jobs")),
      "--storage"));
  Coordinator coordinator(options.coordinator);
  HealthService health;
  Authorizer auth(
      {options.tls.enabled(), options.token, options.coordinator.log});
  JobServiceImpl jobs(&coordinator, &auth, options.shutdown);
  ClusterServiceImpl cluster(&coordinator, &auth);
  DaemonServerOptions serve;
  serve.listen = options.listen;
  serve.tls = options.tls;
  serve.client_certificates = ClientCertificates::kRequestAndVerify;
  serve.health_listen = options.health_listen;
  ASSIGN_OR_RETURN(std::unique_ptr<DaemonServer> server,
                   DaemonServer::Start(serve, {&jobs, &cluster}, &health));
  std::unique_ptr<HttpServer> http;
  if (!options.http.empty()) {
    ASSIGN_OR_RETURN(http, HttpServer::Start(options.http, "--http",
                                             CoordinatorRoutes(&coordinator)));
  }
  // Workers heartbeating under their old ids must find them, and jobs must
  // not be resubmittable as new: until the journal is replayed, health says
  // NOT_SERVING and every other call is answered UNAVAILABLE.
  RETURN_IF_ERROR(coordinator.LoadJournal());
  health.SetReady(true);
  const std::string& address = server->address();
  if (!options.address_file.empty()) {
    RETURN_IF_ERROR(
        AnnotateStatus(WriteFileAtomic(options.address_file, address + "\n"),
                       "--address-file"));
  }
  if (options.coordinator.log) {
    const auto& log = options.coordinator.log;
    log(absl::StrCat(
        "coordinator listening on ", address, ", storage ",
        options.coordinator.storage_dir,
        options.tls.enabled() ? ", TLS (workers need a certificate signed by "
                                "--tls-ca)"
                              : ", no TLS",
        options.token.empty() ? "" : ", bearer token required for jobs"));
    if (http != nullptr) {
      log(absl::StrCat("dashboard on http://", http->address(),
                       "/ (metrics at /metrics)"));
    }
    if (!server->health_address().empty()) {
      log(absl::StrCat("gRPC health (plaintext, for probes) on ",
                       server->health_address()));
    }
    if (!options.tls.enabled() && !IsLoopbackAddress(options.listen)) {
      log(absl::StrCat("warning: listening on ", address,
                       " without TLS: anyone who can reach it can submit "
                       "jobs and join the ring",
                       options.token.empty()
                           ? ""
                           : " (and the bearer token crosses the network "
                             "in clear text)"));
    }
  }
  while (!options.shutdown->load()) {
    coordinator.Tick();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // Probes see NOT_SERVING at once; then the last state goes to the journal
  // so that the next coordinator resumes every job from it.
  health.ShutDown();
  absl::Status saved = coordinator.SaveJournal();
  if (options.coordinator.log) {
    options.coordinator.log(
        saved.ok() ? absl::StrCat("shutting down: journal written to ",
                                  coordinator.JournalPath())
                   : absl::StrCat("error: shutting down without the journal: ",
                                  saved.message()));
  }
  http.reset();
  server->Shutdown();
  return saved;
}

}  // namespace lockstep
