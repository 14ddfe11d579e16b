// Coordinator server: bind, serve both services, tick, shut down cleanly.
#include "coordinator/server.h"

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "coordinator/ops_endpoints.h"
#include "coordinator/services.h"
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
  grpc::ServerBuilder builder;
  ConfigureServer(builder);
  int port = 0;
  builder.AddListeningPort(
      options.listen,
      MakeServerCredentials(options.tls, ClientCertificates::kRequestAndVerify),
      &port);
  builder.RegisterService(&jobs);
  builder.RegisterService(&cluster);
  builder.RegisterService(&health);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("--listen ", options.listen,
                     ": cannot listen there (in use or not a local address?)"));
  }
  auto stop = [&server, &health] {
    health.ShutDown();
    server->Shutdown(std::chrono::system_clock::now() +
                     std::chrono::seconds(2));
  };
  std::unique_ptr<grpc::Server> health_server;
  std::string health_address;
  if (!options.health_listen.empty()) {
    absl::StatusOr<std::unique_ptr<grpc::Server>> h = StartHealthServer(
        options.health_listen, "--health-listen", &health, &health_address);
    if (!h.ok()) {
      stop();
      return h.status();
    }
    health_server = *std::move(h);
  }
  std::unique_ptr<HttpServer> http;
  if (!options.http.empty()) {
    absl::StatusOr<std::unique_ptr<HttpServer>> h = HttpServer::Start(
        options.http, "--http", CoordinatorRoutes(&coordinator));
    if (!h.ok()) {
      stop();
      return h.status();
    }
    http = *std::move(h);
  }
  // Workers heartbeating under their old ids must find them, and jobs must
  // not be resubmittable as new: until the journal is replayed, health says
  // NOT_SERVING and every other call is answered UNAVAILABLE.
  absl::Status loaded = coordinator.LoadJournal();
  if (!loaded.ok()) {
    stop();
    return loaded;
  }
  health.SetReady(true);
  const std::string address = absl::StrCat(
      options.listen.substr(0, options.listen.rfind(':')), ":", port);
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
    if (health_server != nullptr) {
      log(absl::StrCat("gRPC health (plaintext, for probes) on ",
                       health_address));
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
  if (health_server != nullptr) {
    health_server->Shutdown(std::chrono::system_clock::now() +
                            std::chrono::seconds(1));
  }
  http.reset();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return saved;
}

}  // namespace lockstep
