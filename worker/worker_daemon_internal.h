// The worker daemon's class (worker_daemon.h's RunWorker runs one), shared
// by its two files: worker_daemon.cc (registration, heartbeats, the ops
// endpoints, the main loop) and worker_job.cc (the thread that runs the
// current assignment: start, stop, leave, drain). Not for other users.
#ifndef LOCKSTEP_WORKER_WORKER_DAEMON_INTERNAL_H_
#define LOCKSTEP_WORKER_WORKER_DAEMON_INTERNAL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "proto/cluster.grpc.pb.h"
#include "rpc/coordinator_stubs.h"
#include "rpc/health_service.h"
#include "rpc/http_server.h"
#include "worker/collective_service.h"
#include "worker/job_runner.h"
#include "worker/kept_state.h"
#include "worker/worker_daemon.h"
#include "worker/worker_metrics.h"

namespace lockstep {
namespace worker_internal {

class WorkerDaemon {
 public:
  explicit WorkerDaemon(const WorkerOptions& o) : o_(o) {}
  absl::Status Run();

 private:
  void Log(const std::string& line) {
    if (o_.log) o_.log(line);
  }
  bool ShuttingDown() const {
    return o_.shutdown != nullptr && o_.shutdown->load();
  }
  absl::Status Register();
  // Errors only for what ends the daemon (it was replaced).
  absl::Status Heartbeat();
  void StartJob(const lockstep::v1::Assignment& a);
  void StopJob(const std::string& reason);
  // Tells the coordinator (Finish with `leaving`) before the job stops.
  void AnnounceLeaving();
  void ReapJob();
  // On shutdown: lets the running job drain, heartbeating meanwhile;
  // abandons it (telling the coordinator) after drain_timeout_seconds.
  void DrainJob();
  absl::Status StartOpsEndpoints();

  const WorkerOptions& o_;
  HealthService health_;
  WorkerMetrics metrics_;
  std::unique_ptr<HttpServer> http_;
  std::string address_;
  CollectiveService collective_;
  // A failed generation's training state, for the next one (served to the
  // other ranks beside the collective service).
  KeptState kept_;
  WorkerStateService kept_service_{&kept_};
  std::unique_ptr<CoordinatorStubs> stubs_;
  std::string worker_id_;
  // When this process started (RegisterRequest.started_unix_micros).
  const int64_t started_unix_micros_ = absl::ToUnixMicros(absl::Now());
  double heartbeat_seconds_ = 1.0;
  bool coordinator_down_logged_ = false;

  // The running job.
  std::unique_ptr<std::thread> job_thread_;
  std::atomic<bool> job_done_{false};
  std::atomic<bool> job_stop_{false};
  std::atomic<bool> leave_{false};
  std::atomic<bool> job_regroup_{false};
  std::atomic<bool> left_{false};
  lockstep::v1::Assignment assignment_;
  RunnerContext runner_;
};

}  // namespace worker_internal
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_WORKER_DAEMON_INTERNAL_H_
