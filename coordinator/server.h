// `lockstep coordinator`: the coordinator's gRPC server (job service and
// coordinator service on one port) and its housekeeping thread.
#ifndef LOCKSTEP_COORDINATOR_SERVER_H_
#define LOCKSTEP_COORDINATOR_SERVER_H_

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/coordinator.h"
#include "rpc/tls.h"

namespace lockstep {

struct ServerOptions {
  std::string listen = "127.0.0.1:7070";
  // When set, "host:port" (the bound port) is written here once serving:
  // lets scripts and tests use --listen 127.0.0.1:0.
  std::string address_file;
  // TLS on the port (off when empty); with TLS every worker RPC needs a
  // client certificate signed by tls.ca.
  TlsFiles tls;
  // When set, every JobService RPC needs `authorization: Bearer <token>`.
  std::string token;
  // Prometheus /metrics, the dashboard (/) and its JSON (/api/state) over
  // HTTP here when set ("host:port").
  std::string http;
  // A plaintext gRPC port serving only grpc.health.v1 (Kubernetes' probes
  // cannot speak TLS) when set; the main port serves it too.
  std::string health_listen;
  CoordinatorOptions coordinator;
  const std::atomic<bool>* shutdown = nullptr;  // not owned
  // After *shutdown, keep serving workers up to this long while jobs are
  // still RUNNING, so workers shut down at the same moment (a batch
  // system's cancel signals every process of the allocation at once) can
  // commit their drain checkpoint through this coordinator. 0: stop at once.
  double shutdown_grace_seconds = 0;
  // With etcd endpoints (DESIGN "Coordinator high availability"): several
  // coordinators share the storage; one leads through an etcd lease, the
  // others stand by (health NOT_SERVING, every call UNAVAILABLE naming the
  // leader) and campaign when its key goes. The journal lives in etcd,
  // under etcd_prefix. Empty: one coordinator, its journal a file on the
  // storage, which it locks.
  std::vector<std::string> etcd;
  TlsFiles etcd_tls;  // for https:// endpoints
  std::string etcd_prefix = "/lockstep";
  // The address the others name as the leader's (default: the bound one).
  std::string advertise;
};

// Serves until *shutdown (and the grace above), then writes the journal and
// returns. Error when
// an address cannot be bound, the storage folder cannot be created, or the
// journal is damaged. With etcd, a leader that lost its lease steps down
// by exiting the process at once (code 1, the reason logged), and its
// supervisor starts it again as a standby, as Kubernetes'
// controller-manager does. Health says
// NOT_SERVING until the journal is replayed (the other services answer
// UNAVAILABLE meanwhile) and from the shutdown on. Logs a warning when it
// listens beyond the loopback interface without TLS.
absl::Status RunCoordinator(const ServerOptions& options);

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_SERVER_H_
