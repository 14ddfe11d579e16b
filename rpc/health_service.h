// grpc.health.v1.Health for the daemons. Two service names:
//   ""          ready: the coordinator has replayed its journal and serves;
//               a worker is registered with the coordinator.
//   "liveness"  SERVING until the process starts shutting down.
// Any other name is NOT_FOUND (Check) or SERVICE_UNKNOWN (Watch), as the
// protocol says. One object may be registered on several servers (the main
// port and the plaintext probe port), which then answer alike.
#ifndef LOCKSTEP_RPC_HEALTH_SERVICE_H_
#define LOCKSTEP_RPC_HEALTH_SERVICE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/health.grpc.pb.h"

namespace lockstep {

inline constexpr char kLivenessService[] = "liveness";

class HealthService final : public grpc::health::v1::Health::Service {
 public:
  using Status = grpc::health::v1::HealthCheckResponse::ServingStatus;

  // Starts alive and not ready.
  HealthService() = default;

  void SetReady(bool ready);
  // Both names NOT_SERVING from now on, and Watch streams end.
  void ShutDown();
  Status Get(const std::string& service) const;

  grpc::Status Check(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override;
  // Sends the status now and at every change until the client goes away
  // or the service shuts down; polls for cancellation every 200 ms.
  grpc::Status Watch(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::ServerWriter<grpc::health::v1::HealthCheckResponse>*
                         writer) override;

 private:
  mutable absl::Mutex mu_;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lockstep

#endif  // LOCKSTEP_RPC_HEALTH_SERVICE_H_
