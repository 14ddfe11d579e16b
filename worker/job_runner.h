// One worker's part of one generation of a cluster job: its local replicas
// over the shard plan, gradient buckets all-reduced over the gRPC ring, the
// optimizer update, and the control-plane reports (progress and metrics from
// rank 0, fingerprints from every rank, checkpoint slices, the finish).
#ifndef LOCKSTEP_WORKER_JOB_RUNNER_H_
#define LOCKSTEP_WORKER_JOB_RUNNER_H_

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/log.h"
#include "proto/cluster.grpc.pb.h"
#include "rpc/coordinator_stubs.h"
#include "rpc/rpc_util.h"
#include "worker/collective_service.h"
#include "worker/kept_state.h"
#include "worker/worker_metrics.h"

namespace lockstep {

struct RunnerContext {
  std::string worker_id;
  CoordinatorStubs* coordinator = nullptr;  // not owned
  CollectiveService* collective = nullptr;  // not owned
  int threads = 0;  // compute threads; 0 = every core
  // GPU replicas, one per ordinal (the worker's --devices); empty: CPU.
  std::vector<int> cuda_devices;
  int lanes = 2;  // ring streams to the next rank
  TlsFiles tls;   // for the ring channels; off: plaintext
  int ring_keepalive_timeout_ms = kKeepaliveTimeoutMs;  // GrpcRingOptions'
  absl::Duration collective_timeout = absl::Seconds(120);
  // Set when the coordinator says STOP; checked every step. Not owned.
  const std::atomic<bool>* stop = nullptr;
  // Set when this worker is shutting down (SIGTERM): the ranks agree, in
  // the step's loss all-reduce, to finish that step, save a checkpoint of
  // it and end the generation; this rank then tells the coordinator it
  // leaves. Not owned.
  const std::atomic<bool>* leave = nullptr;
  // Set when the coordinator asks the running generation to end after a
  // step because workers join the (elastic) job: the ranks agree on the
  // step in its loss all-reduce, keep their state (CPU replicas; GPU ones
  // save a checkpoint of it) and Finish with `regroup`. Not owned.
  const std::atomic<bool>* regroup = nullptr;
  // Set when this rank drained and its Finish told the coordinator it
  // leaves. Not owned; may be null.
  std::atomic<bool>* left = nullptr;
  WorkerMetrics* metrics = nullptr;  // not owned; may be null
  // Where a failed generation's training state is kept for the next one
  // (CPU replicas), and where an assignment that starts from a worker's
  // memory finds its own. Not owned; may be null (nothing kept).
  KeptState* kept = nullptr;
  LogFn log;
  // Reports progress to the coordinator at most this often (rank 0).
  double report_interval_seconds = 1.0;
  // When set (the worker's --step-times): every step's end time is
  // recorded and one JSON line per run appended here as it ends
  // (worker/step_times.h).
  std::string step_times;
};

// Runs `assignment` until the job's last step, a STOP, a drain, or an
// error, then tells the coordinator (Finish) how it ended (a run that ended
// early on CPU replicas keeps its state in `kept` and says so): a rank that
// drained because it leaves sends Finish with `leaving`; the others wait for
// the coordinator's STOP (up to a minute). Blocks. Returns the error
// that ended it (Cancelled for a STOP), OK when it trained to the end.
absl::Status RunAssignment(const lockstep::v1::Assignment& assignment,
                           const RunnerContext& context);

}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_JOB_RUNNER_H_
