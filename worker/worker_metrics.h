// A worker's Prometheus metrics (served at /metrics by `lockstep worker
// --http`): registration and heartbeats, the job it runs, steps, samples,
// loss, all-reduce time and bytes, checkpoint uploads. Thread-safe: the
// training thread, the daemon's loop and the HTTP threads share it.
#ifndef LOCKSTEP_WORKER_WORKER_METRICS_H_
#define LOCKSTEP_WORKER_WORKER_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <string>

#include "absl/synchronization/mutex.h"
#include "worker/decaying_sum.h"

namespace lockstep {

struct StepSample {
  double seconds = 0;            // the whole step
  int64_t local_samples = 0;     // this worker's replicas' share
  double loss = 0;               // global mean loss of the step
  double accuracy = 0;           // global accuracy of the step
  double allreduce_seconds = 0;  // gradient all-reduce, summed over buckets
  double wait_seconds = 0;       // all-reduce time not hidden by backward
  int64_t allreduce_bytes = 0;   // gradient bytes all-reduced
};

class WorkerMetrics {
 public:
  WorkerMetrics();

  void SetRegistered(bool registered);
  void HeartbeatAnswered();  // the coordinator answered a heartbeat now
  // The job this worker runs now (one at a time); Clear when it ends.
  void SetAssignment(const std::string& job, int64_t generation, int rank,
                     int world_size);
  void ClearAssignment();
  void AddStep(int64_t step, const StepSample& s);
  // Steps and this worker's own work in them (step time less the
  // all-reduce wait), recently: decaying sums (half-life 10 s) since the
  // current assignment began.
  struct RecentWork {
    double steps = 0;
    double compute_seconds = 0;
  };
  RecentWork Recent();
  void SetRate(double samples_per_second);  // the job's, all workers
  void AddCheckpointUpload(double seconds, bool ok);
  void AddLeave();  // a graceful departure (SIGTERM) completed

  // The text exposition format (version 0.0.4).
  std::string Text() const;

 private:
  prometheus::Registry registry_;
  prometheus::Gauge& registered_;
  prometheus::Gauge& last_heartbeat_;
  prometheus::Family<prometheus::Gauge>& assignment_family_;
  prometheus::Gauge& generation_;
  prometheus::Gauge& rank_;
  prometheus::Gauge& step_;
  prometheus::Counter& steps_;
  prometheus::Counter& samples_;
  prometheus::Gauge& loss_;
  prometheus::Gauge& accuracy_;
  prometheus::Gauge& rate_;
  prometheus::Histogram& step_seconds_;
  prometheus::Histogram& allreduce_seconds_;
  prometheus::Counter& allreduce_seconds_total_;
  prometheus::Counter& allreduce_wait_seconds_total_;
  prometheus::Counter& allreduce_bytes_;
  prometheus::Histogram& checkpoint_seconds_;
  prometheus::Counter& checkpoint_failures_;
  prometheus::Counter& leaves_;
  absl::Mutex mu_;
  prometheus::Gauge* assignment_ ABSL_GUARDED_BY(mu_) = nullptr;
  DecayingSum recent_steps_ ABSL_GUARDED_BY(mu_);
  DecayingSum recent_compute_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_WORKER_METRICS_H_
