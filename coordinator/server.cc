// Coordinator server: bind, serve both services, tick, shut down cleanly.
#include "coordinator/server.h"

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "coordinator/services.h"
#include "core/file_util.h"
#include "core/status_macros.h"
#include "proto/rpc_util.h"

namespace lockstep {

absl::Status RunCoordinator(const ServerOptions& options) {
  RETURN_IF_ERROR(AnnotateStatus(
      MakeDirs(JoinPath(options.coordinator.storage_dir, "jobs")),
      "--storage"));
  Coordinator coordinator(options.coordinator);
  // Before serving: workers heartbeating under their old ids must find
  // them, and jobs must not be resubmittable as new.
  RETURN_IF_ERROR(coordinator.LoadJournal());
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
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("--listen ", options.listen,
                     ": cannot listen there (in use or not a local address?)"));
  }
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
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return absl::OkStatus();
}

}  // namespace lockstep
