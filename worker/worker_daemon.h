// The worker daemon (`lockstep worker`): hosts the collective service,
// registers with the coordinator, heartbeats, and runs the assignments the
// coordinator hands it, one at a time, until asked to shut down.
#ifndef LOCKSTEP_WORKER_WORKER_DAEMON_H_
#define LOCKSTEP_WORKER_WORKER_DAEMON_H_

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/log.h"
#include "rpc/rpc_util.h"
#include "rpc/tls.h"

namespace lockstep {

struct WorkerOptions {
  // host:port, or several comma-separated (coordinators in standby
  // behind an etcd lease: the worker follows the one that leads).
  std::string coordinator;
  std::string listen = "127.0.0.1:0";  // the collective service
  // The address peers dial; default: listen's host with the bound port.
  std::string advertise;
  // Stable identity at the coordinator; "" = the advertised address.
  std::string name;
  int replicas = 1;  // replicas offered (CPU, or one per CUDA device)
  // One GPU replica per ordinal when set (replicas == its size).
  std::vector<int> cuda_devices;
  int threads = 0;  // compute threads; 0 = every core
  int lanes = 2;    // ring streams to the next rank
  // --ring-keepalive-timeout: a ring stream silent this long is broken.
  int ring_keepalive_timeout_ms = kKeepaliveTimeoutMs;
  // The worker's certificate, key and CA: its client certificate towards
  // the coordinator and ring peers, and its collective service's server
  // certificate (which then requires peers' certificates signed by the
  // CA). Off: plaintext everywhere.
  TlsFiles tls;
  // Prometheus /metrics over HTTP here when set ("host:port").
  std::string http;
  // A plaintext gRPC port serving only grpc.health.v1 (for Kubernetes'
  // probes) when set; the collective port serves it too.
  std::string health_listen;
  // On shutdown, how long the running job may take to drain (finish its
  // step, checkpoint it with the other ranks) before it is abandoned.
  double drain_timeout_seconds = 30;
  // --step-times: the end time of every step of each job run here is
  // appended to this file (one JSON line per run, worker/step_times.h).
  // Checked at start-up; "" = off.
  std::string step_times;
  // Overrides the protocol version sent at registration (tests only).
  int protocol_version = -1;
  // Set by a signal handler: stop the running job and return.
  const std::atomic<bool>* shutdown = nullptr;
  LogFn log;
};

// Blocks until *shutdown; then a running job drains (see RunnerContext::
// leave) and the coordinator is told this worker leaves. Errors: the listen
// address cannot be bound, or the coordinator refused the registration
// (FailedPrecondition with its reason, e.g. another protocol version;
// Unauthenticated without an accepted certificate). An unreachable coordinator,
// which includes a failed TLS handshake, is retried (and logged, with a TLS
// hint) for as long as the daemon runs.
absl::Status RunWorker(const WorkerOptions& options);

}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_WORKER_DAEMON_H_
