// The daemons' health service (see health_service.h).
#include "rpc/health_service.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "rpc/rpc_util.h"

namespace lockstep {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

void HealthService::SetReady(bool ready) {
  absl::MutexLock lock(&mu_);
  ready_ = ready;
}

void HealthService::ShutDown() {
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
}

namespace {

HealthService::Status StatusOf(const std::string& service, bool ready,
                               bool shut_down) {
  if (service.empty()) {
    return ready && !shut_down ? HealthCheckResponse::SERVING
                               : HealthCheckResponse::NOT_SERVING;
  }
  if (service == kLivenessService) {
    return shut_down ? HealthCheckResponse::NOT_SERVING
                     : HealthCheckResponse::SERVING;
  }
  return HealthCheckResponse::SERVICE_UNKNOWN;
}

}  // namespace

HealthService::Status HealthService::Get(const std::string& service) const {
  absl::MutexLock lock(&mu_);
  return StatusOf(service, ready_, shut_down_);
}

grpc::Status HealthService::Check(grpc::ServerContext*,
                                  const HealthCheckRequest* request,
                                  HealthCheckResponse* response) {
  const Status s = Get(request->service());
  if (s == HealthCheckResponse::SERVICE_UNKNOWN) {
    return grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        absl::StrCat("unknown service \"", request->service(),
                     "\": lockstep serves \"\" (ready) and \"liveness\""));
  }
  response->set_status(s);
  return grpc::Status::OK;
}

grpc::Status HealthService::Watch(
    grpc::ServerContext* context, const HealthCheckRequest* request,
    grpc::ServerWriter<HealthCheckResponse>* writer) {
  bool first = true;
  Status last = HealthCheckResponse::UNKNOWN;
  while (!context->IsCancelled()) {
    // The status and the shutdown flag are read together, so the status
    // a shutdown brings (NOT_SERVING) is always sent before the stream
    // ends: a watcher never sees the stream close on a stale SERVING.
    bool ready, shut_down;
    {
      absl::MutexLock lock(&mu_);
      ready = ready_;
      shut_down = shut_down_;
    }
    const Status s = StatusOf(request->service(), ready, shut_down);
    if (first || s != last) {
      HealthCheckResponse r;
      r.set_status(s);
      if (!writer->Write(r)) break;
      first = false;
      last = s;
    }
    if (shut_down) break;
    absl::MutexLock lock(&mu_);
    // Wakes early on a change; the timeout bounds the cancellation check.
    auto changed = [this, ready]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return ready_ != ready || shut_down_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&changed), absl::Milliseconds(200));
  }
  return grpc::Status::OK;
}

}  // namespace lockstep
