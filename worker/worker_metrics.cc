// A worker's Prometheus metrics (see worker_metrics.h).
#include "worker/worker_metrics.h"

#include <algorithm>

#include <prometheus/text_serializer.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace lockstep {
namespace {

prometheus::Gauge& Gauge(prometheus::Registry& r, const std::string& name,
                         const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
}

prometheus::Counter& Counter(prometheus::Registry& r, const std::string& name,
                             const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
}

prometheus::Histogram& Histogram(prometheus::Registry& r,
                                 const std::string& name,
                                 const std::string& help,
                                 prometheus::Histogram::BucketBoundaries b) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add(
      {}, std::move(b));
}

// 100 us .. ~100 s, factor ~3 apart.
prometheus::Histogram::BucketBoundaries Seconds() {
  return {1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 100};
}

}  // namespace

WorkerMetrics::WorkerMetrics()
    : registered_(Gauge(registry_, "lockstep_worker_registered",
                        "1 while registered with the coordinator")),
      last_heartbeat_(
          Gauge(registry_, "lockstep_worker_last_heartbeat_timestamp_seconds",
                "Unix time the coordinator last answered a heartbeat")),
      assignment_family_(prometheus::BuildGauge()
                             .Name("lockstep_worker_assignment")
                             .Help("1 for the job this worker runs now, "
                                   "labelled with its generation and rank")
                             .Register(registry_)),
      generation_(Gauge(registry_, "lockstep_worker_generation",
                        "Generation of the running job (-1 idle)")),
      rank_(Gauge(registry_, "lockstep_worker_rank",
                  "Rank in the running job (-1 idle)")),
      step_(Gauge(registry_, "lockstep_worker_step",
                  "Steps of the running job completed")),
      steps_(Counter(registry_, "lockstep_worker_steps_total",
                     "Training steps completed by this worker")),
      samples_(Counter(registry_, "lockstep_worker_samples_total",
                       "Training samples this worker's replicas processed")),
      loss_(Gauge(registry_, "lockstep_worker_loss",
                  "Mean training loss of the last step (all ranks)")),
      accuracy_(Gauge(registry_, "lockstep_worker_accuracy",
                      "Training accuracy of the last step (all ranks)")),
      rate_(Gauge(registry_, "lockstep_worker_samples_per_second",
                  "The job's training samples per second (all workers), "
                  "over the last report interval")),
      step_seconds_(Histogram(registry_, "lockstep_worker_step_seconds",
                              "Wall time of a training step", Seconds())),
      allreduce_seconds_(
          Histogram(registry_, "lockstep_worker_allreduce_seconds",
                    "Gradient all-reduce time per step, summed over buckets "
                    "(overlaps backward)",
                    Seconds())),
      allreduce_seconds_total_(
          Counter(registry_, "lockstep_worker_allreduce_seconds_total",
                  "Gradient all-reduce time, summed over buckets")),
      allreduce_wait_seconds_total_(Counter(
          registry_, "lockstep_worker_allreduce_wait_seconds_total",
          "All-reduce time not hidden behind backward (the step waited)")),
      allreduce_bytes_(Counter(registry_,
                               "lockstep_worker_allreduce_bytes_total",
                               "Gradient bytes all-reduced")),
      checkpoint_seconds_(Histogram(
          registry_, "lockstep_worker_checkpoint_upload_seconds",
          "Time to upload this worker's checkpoint slice", Seconds())),
      checkpoint_failures_(
          Counter(registry_, "lockstep_worker_checkpoint_upload_failures_total",
                  "Checkpoint slices not saved (training went on)")),
      leaves_(Counter(registry_, "lockstep_worker_graceful_leaves_total",
                      "Jobs left after SIGTERM at a step boundary")) {
  generation_.Set(-1);
  rank_.Set(-1);
}

void WorkerMetrics::SetRegistered(bool registered) {
  registered_.Set(registered ? 1 : 0);
}

void WorkerMetrics::HeartbeatAnswered() {
  last_heartbeat_.Set(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
}

void WorkerMetrics::SetAssignment(const std::string& job, int64_t generation,
                                  int rank, int world_size) {
  absl::MutexLock lock(&mu_);
  if (assignment_ != nullptr) assignment_family_.Remove(assignment_);
  assignment_ =
      &assignment_family_.Add({{"job", job},
                               {"generation", absl::StrCat(generation)},
                               {"rank", absl::StrCat(rank)},
                               {"world_size", absl::StrCat(world_size)}});
  assignment_->Set(1);
  generation_.Set(static_cast<double>(generation));
  rank_.Set(rank);
  step_.Set(0);
  recent_steps_ = DecayingSum();
  recent_compute_ = DecayingSum();
}

void WorkerMetrics::ClearAssignment() {
  absl::MutexLock lock(&mu_);
  if (assignment_ != nullptr) assignment_family_.Remove(assignment_);
  assignment_ = nullptr;
  generation_.Set(-1);
  rank_.Set(-1);
  rate_.Set(0);  // idle: no job's samples go through it now
}

void WorkerMetrics::AddStep(int64_t step, const StepSample& s) {
  step_.Set(static_cast<double>(step));
  steps_.Increment();
  samples_.Increment(static_cast<double>(s.local_samples));
  loss_.Set(s.loss);
  accuracy_.Set(s.accuracy);
  step_seconds_.Observe(s.seconds);
  allreduce_seconds_.Observe(s.allreduce_seconds);
  allreduce_seconds_total_.Increment(s.allreduce_seconds);
  allreduce_wait_seconds_total_.Increment(s.wait_seconds);
  allreduce_bytes_.Increment(static_cast<double>(s.allreduce_bytes));
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  recent_steps_.Add(1, now);
  recent_compute_.Add(std::max(0.0, s.seconds - s.wait_seconds), now);
}

WorkerMetrics::RecentWork WorkerMetrics::Recent() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  return RecentWork{recent_steps_.Value(now), recent_compute_.Value(now)};
}

void WorkerMetrics::SetRate(double samples_per_second) {
  rate_.Set(samples_per_second);
}

void WorkerMetrics::AddCheckpointUpload(double seconds, bool ok) {
  checkpoint_seconds_.Observe(seconds);
  if (!ok) checkpoint_failures_.Increment();
}

void WorkerMetrics::AddLeave() { leaves_.Increment(); }

std::string WorkerMetrics::Text() const {
  return prometheus::TextSerializer().Serialize(registry_.Collect());
}

}  // namespace lockstep
