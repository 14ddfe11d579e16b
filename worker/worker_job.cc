// The worker daemon's running job (see worker_daemon_internal.h): the
// thread that runs the current assignment, and stopping, leaving and
// draining it.
#include <chrono>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "rpc/rpc_util.h"
#include "worker/worker_daemon_internal.h"

namespace lockstep {
namespace worker_internal {

void WorkerDaemon::StartJob(const lockstep::v1::Assignment& a) {
  assignment_ = a;
  job_done_ = false;
  job_stop_ = false;
  job_regroup_ = false;
  runner_.worker_id = worker_id_;
  runner_.coordinator = stubs_.get();
  runner_.collective = &collective_;
  runner_.threads = o_.threads;
  runner_.cuda_devices = o_.cuda_devices;
  runner_.lanes = o_.lanes;
  runner_.ring_keepalive_timeout_ms = o_.ring_keepalive_timeout_ms;
  runner_.tls = o_.tls;
  runner_.stop = &job_stop_;
  runner_.leave = &leave_;
  runner_.regroup = &job_regroup_;
  runner_.left = &left_;
  runner_.metrics = &metrics_;
  runner_.kept = &kept_;
  runner_.log = o_.log;
  runner_.step_times = o_.step_times;
  Log(absl::StrFormat("starting job %s generation %d as rank %d of %d", a.job(),
                      a.generation(), a.rank(), a.world_size()));
  job_thread_ = std::make_unique<std::thread>([this] {
    absl::Status s = RunAssignment(assignment_, runner_);
    // This worker's part of the generation, not the job: a recovering or
    // regrouping job goes on without it (the status code name read as if
    // the job were CANCELLED).
    Log(s.ok()
            ? absl::StrFormat("job %s: my part is done", assignment_.job())
            : absl::StrFormat(
                  "job %s generation %d: this worker's part ended%s: %s",
                  assignment_.job(), assignment_.generation(),
                  absl::IsCancelled(s) ? " (the coordinator stopped it)" : "",
                  s.message()));
    job_done_ = true;
  });
}

void WorkerDaemon::AnnounceLeaving() {
  lockstep::v1::FinishRequest req;
  req.set_worker_id(worker_id_);
  req.set_job(assignment_.job());
  req.set_generation(assignment_.generation());
  req.set_rank(assignment_.rank());
  req.set_error("the worker is shutting down");
  req.set_error_code(static_cast<int32_t>(absl::StatusCode::kCancelled));
  req.set_leaving(true);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  // A coordinator that just restarted may still be in the channel's
  // reconnect back-off: wait for it (within the deadline) instead of
  // failing at once and leaving the membership to the heartbeat timeout.
  context.set_wait_for_ready(true);
  lockstep::v1::FinishResponse resp;
  absl::Status s = stubs_->Run([&](CoordinatorStubs::Stub* stub) {
    return FromGrpc(stub->Finish(&context, req, &resp),
                    "telling the coordinator this worker leaves");
  });
  if (!s.ok()) {
    Log(absl::StrCat("warning: ", s.message()));
  } else if (assignment_.job().empty()) {
    Log("left the cluster");
  } else {
    Log(absl::StrFormat("left job %s (generation %d)", assignment_.job(),
                        assignment_.generation()));
  }
}

void WorkerDaemon::StopJob(const std::string& reason) {
  job_stop_ = true;
  collective_.AbortCurrent(absl::CancelledError(reason));
}

void WorkerDaemon::ReapJob() {
  if (job_thread_ != nullptr && job_done_) {
    job_thread_->join();
    job_thread_.reset();
    assignment_.Clear();
  }
}

void WorkerDaemon::DrainJob() {
  Log(absl::StrFormat(
      "shutting down: job %s finishes its current step, saves a checkpoint "
      "of it with the other ranks, and this worker leaves",
      assignment_.job()));
  leave_ = true;
  const auto give_up = std::chrono::steady_clock::now() +
                       std::chrono::duration<double>(o_.drain_timeout_seconds);
  while (!job_done_ && std::chrono::steady_clock::now() < give_up) {
    Heartbeat().IgnoreError();  // a STOP (from a peer's end) ends it too
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::duration<double>(heartbeat_seconds_);
    while (!job_done_ && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  bool announced = false;
  if (!job_done_) {
    Log(
        absl::StrFormat("warning: job %s did not drain within %.0f s; leaving "
                        "without it",
                        assignment_.job(), o_.drain_timeout_seconds));
    // Say so before the ring notices: a neighbour's broken stream would
    // otherwise be reported first, as if this worker had crashed.
    AnnounceLeaving();
    announced = true;
    StopJob("the worker is shutting down");
  }
  job_thread_->join();
  job_thread_.reset();
  // The generation may have ended for another reason first (another rank
  // drained at an earlier step, say): then this worker still has to leave
  // the membership, or the next generation would count on it.
  if (!left_ && !announced) AnnounceLeaving();
}

}  // namespace worker_internal
}  // namespace lockstep
