// A daemon's servers: its services and health on --listen, health alone on
// --health-listen, a busy port refused naming the flag, and health served
// on both.
#include "rpc/daemon_server.h"

#include <chrono>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "proto/health.grpc.pb.h"

namespace lockstep {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

HealthCheckResponse::ServingStatus Check(const std::string& address) {
  auto stub = Health::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  HealthCheckResponse r;
  grpc::Status s = stub->Check(&context, HealthCheckRequest(), &r);
  EXPECT_TRUE(s.ok()) << address << ": " << s.error_message();
  return r.status();
}

TEST(DaemonServerTest, ServesHealthOnBothPortsAndRefusesBusyOnes) {
  HealthService health;
  DaemonServerOptions options;
  options.listen = "127.0.0.1:0";
  options.health_listen = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<DaemonServer>> server =
      DaemonServer::Start(options, {}, &health);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = (*server)->address();
  const std::string health_address = (*server)->health_address();
  EXPECT_EQ(address, "127.0.0.1:" + std::to_string((*server)->port()));
  EXPECT_NE(health_address, address);
  EXPECT_EQ(Check(address), HealthCheckResponse::NOT_SERVING);
  health.SetReady(true);
  EXPECT_EQ(Check(address), HealthCheckResponse::SERVING);
  EXPECT_EQ(Check(health_address), HealthCheckResponse::SERVING);

  DaemonServerOptions busy = options;
  busy.listen = address;
  absl::StatusOr<std::unique_ptr<DaemonServer>> again =
      DaemonServer::Start(busy, {}, &health);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kUnavailable);
  const auto in_use = [](const std::string& address) {
    const std::string port = address.substr(address.rfind(':') + 1);
    return address + ": port " + port +
           " is in use by another process (ss -ltnp 'sport = :" + port +
           "' names it; port 0 picks a free one)";
  };
  EXPECT_EQ(again.status().message(), "--listen " + in_use(address));
  busy.listen = "127.0.0.1:0";
  busy.health_listen = health_address;
  again = DaemonServer::Start(busy, {}, &health);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().message(),
            "--health-listen " + in_use(health_address));

  health.ShutDown();
  (*server)->Shutdown();
  (*server)->Shutdown();  // idempotent
  // Without --health-listen there is no second server.
  DaemonServerOptions plain;
  plain.listen = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<DaemonServer>> alone =
      DaemonServer::Start(plain, {}, &health);
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ((*alone)->health_address(), "");
}

}  // namespace
}  // namespace lockstep
