// Who may call the coordinator. With TLS on, worker RPCs (the Coordinator
// service) need a client certificate verified against --tls-ca; with a
// --token-file, job RPCs (JobService) need `authorization: Bearer <token>`.
// Each service method calls one check first; refusals are logged, at most
// once a minute per peer host and reason.
#ifndef LOCKSTEP_COORDINATOR_AUTH_H_
#define LOCKSTEP_COORDINATOR_AUTH_H_

#include <functional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/log.h"
#include "grpcpp/server_context.h"

namespace lockstep {

struct AuthOptions {
  // TLS is on: the server asks for client certificates and verifies any
  // that is presented, so a call that carries one carries a verified one.
  bool require_client_certificate = false;
  std::string token;  // empty: job RPCs need no token
  LogFn log;
};

enum class BearerCheck { kOk, kMissing, kWrong };

// `header`: the value of the call's `authorization` metadata (nullptr when
// absent). Compares with `token` in time independent of where they differ.
BearerCheck CheckBearer(const std::string* header, const std::string& token);

class Authorizer {
 public:
  explicit Authorizer(AuthOptions options) : o_(std::move(options)) {}

  // OK, or UNAUTHENTICATED "worker calls need a client certificate signed
  // by the coordinator's --tls-ca". `method` names the call in the log.
  grpc::Status CheckWorker(const grpc::ServerContext& context,
                           const char* method);
  // OK, or UNAUTHENTICATED: "this coordinator needs a bearer token: ..."
  // when none was sent, "bearer token refused" for a wrong one.
  grpc::Status CheckJobClient(const grpc::ServerContext& context,
                              const char* method);

 private:
  grpc::Status Refuse(const grpc::ServerContext& context, const char* method,
                      const std::string& reason, const std::string& message);

  const AuthOptions o_;
  absl::Mutex mu_;
  // (peer host, reason) -> when it was last logged.
  absl::flat_hash_map<std::string, absl::Time> logged_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_AUTH_H_
