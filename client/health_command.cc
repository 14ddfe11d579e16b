// `lockstep health` (see health_command.h).
#include "client/health_command.h"

#include <chrono>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/cli_flags.h"
#include "client/tls_flags.h"
#include "proto/health.grpc.pb.h"
#include "rpc/rpc_util.h"

namespace lockstep {

int RunHealthCommand(const std::vector<std::string>& args) {
  const std::string usage = absl::StrCat(
      "usage: lockstep health HOST:PORT [--service NAME] [--timeout S] "
      "[--wait] [--tls-cert F --tls-key F --tls-ca F]\n"
      "  asks a coordinator's or worker's grpc.health.v1 service; prints "
      "SERVING or NOT_SERVING\n"
      "  and exits 0 only for SERVING\n"
      "  --service NAME  \"\" (default): ready (the coordinator replayed its "
      "journal; a worker is registered); \"liveness\": not shutting down\n"
      "  --timeout S     give up after S seconds (default 5)\n"
      "  --wait          ask again until SERVING (a daemon still starting: "
      "unreachable or NOT_SERVING), up to --timeout\n",
      kDaemonTlsUsage);
  absl::StatusOr<ParsedFlags> f =
      ParseFlags(args, WithTlsFlags({"service", "timeout"}), {"help", "wait"});
  if (!f.ok() || f->Has("help") || f->positional.size() != 1) {
    if (!f.ok())
      std::cerr << "lockstep health: " << f.status().message() << "\n";
    if (f.ok() && !f->Has("help")) {
      std::cerr << "lockstep health: expected one HOST:PORT\n";
    }
    (f.ok() && f->Has("help") ? std::cout : std::cerr) << usage;
    return f.ok() && f->Has("help") ? 0 : 2;
  }
  absl::StatusOr<int64_t> timeout = f->GetInt("timeout", 5);
  if (!timeout.ok() || *timeout < 1) {
    std::cerr << "lockstep health: --timeout: must be an integer >= 1 "
                 "(seconds)\n";
    return 2;
  }
  absl::StatusOr<TlsFiles> tls = TlsFromFlags(*f, TlsRole::kClient);
  if (!tls.ok()) {
    std::cerr << "lockstep health: " << tls.status().message() << "\n";
    return 2;
  }
  const std::string address = f->positional[0];
  auto stub = grpc::health::v1::Health::NewStub(MakeChannel(address, *tls));
  const auto give_up =
      std::chrono::system_clock::now() + std::chrono::seconds(*timeout);
  const bool wait = f->Has("wait");
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(give_up);
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(f->Get("service", ""));
    grpc::health::v1::HealthCheckResponse resp;
    absl::Status s = FromGrpc(stub->Check(&context, req, &resp),
                              absl::StrCat("health check of ", address));
    const bool serving =
        s.ok() &&
        resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
    const bool again =
        wait && !serving && !absl::IsNotFound(s) &&
        std::chrono::system_clock::now() + std::chrono::milliseconds(100) <
            give_up;
    if (again) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (!s.ok()) {
      // As the other verbs: a failed handshake reads as a closed socket.
      s = AddTlsHint(s, *tls, "the server", "--tls-ca");
      std::cerr << "lockstep health: error: " << s.message() << "\n";
      return 1;
    }
    std::cout << grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
                     resp.status())
              << std::endl;
    return serving ? 0 : 1;
  }
}

}  // namespace lockstep
