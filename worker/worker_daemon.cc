// Worker daemon: collective server, registration, the heartbeat loop and
// the ops endpoints (the running job's thread is in worker_job.cc).
#include "worker/worker_daemon.h"

#include <unistd.h>

#include <chrono>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "core/train/gpu_backend.h"
#include "core/version.h"
#include "proto/cluster.grpc.pb.h"
#include "rpc/daemon_server.h"
#include "rpc/health_service.h"
#include "rpc/http_server.h"
#include "rpc/rpc_util.h"
#include "worker/collective_service.h"
#include "worker/job_runner.h"
#include "worker/kept_state.h"
#include "worker/step_times.h"
#include "worker/worker_daemon_internal.h"
#include "worker/worker_metrics.h"

namespace lockstep {
namespace worker_internal {
namespace {

using lockstep::v1::HeartbeatResponse;

std::string HostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

}  // namespace

absl::Status WorkerDaemon::Register() {
  lockstep::v1::RegisterRequest req;
  req.set_protocol_version(o_.protocol_version >= 0 ? o_.protocol_version
                                                    : kProtocolVersion);
  req.set_host(HostName());
  req.set_pid(getpid());
  req.set_started_unix_micros(started_unix_micros_);
  req.set_collective_address(address_);
  req.set_replicas(o_.replicas);
  if (o_.cuda_devices.empty()) {
    req.add_devices(absl::StrCat("cpu:", o_.replicas));
  } else {
    for (int d : o_.cuda_devices) req.add_devices(absl::StrCat("cuda:", d));
  }
  req.set_version(kVersion);
  req.set_name(o_.name.empty() ? address_ : o_.name);
  // Every worker runs the gRPC ring; GPU workers of the CUDA build also
  // NCCL (core/train/gpu_replicas.h).
  req.add_collectives("ring");
  if (!o_.cuda_devices.empty() && HaveGpuBackend()) {
    req.add_collectives("nccl");
  }
  kept_.Describe(&req);
  while (!ShuttingDown()) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(5));
    lockstep::v1::RegisterResponse resp;
    absl::Status s = AddTlsHint(stubs_->Run([&](CoordinatorStubs::Stub* stub) {
      return FromGrpc(stub->Register(&context, req, &resp),
                      absl::StrCat("Register with ", stubs_->address()));
    }),
                                o_.tls, "the coordinator",
                                "--tls-cert, --tls-key and --tls-ca");
    if (s.ok()) {
      worker_id_ = resp.worker_id();
      heartbeat_seconds_ = resp.heartbeat_interval_seconds() > 0
                               ? resp.heartbeat_interval_seconds()
                               : 1.0;
      coordinator_down_logged_ = false;
      health_.SetReady(true);
      metrics_.SetRegistered(true);
      metrics_.HeartbeatAnswered();
      Log(absl::StrFormat(
          "registered with %s as %s (collective service %s, %d replicas%s%s)",
          stubs_->address(), worker_id_, address_, o_.replicas,
          o_.cuda_devices.empty()
              ? ""
              : absl::StrCat(" on ", absl::StrJoin(o_.cuda_devices, ",",
                                                   [](std::string* out, int d) {
                                                     absl::StrAppend(
                                                         out, "cuda:", d);
                                                   })),
          o_.tls.enabled() ? ", TLS" : ""));
      return absl::OkStatus();
    }
    if (!absl::IsUnavailable(s) && !absl::IsDeadlineExceeded(s)) return s;
    if (!coordinator_down_logged_) {
      Log(absl::StrCat(s.message(), "; retrying every second"));
      coordinator_down_logged_ = true;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  return absl::CancelledError("shut down before registering");
}

absl::Status WorkerDaemon::Heartbeat() {
  lockstep::v1::HeartbeatRequest req;
  req.set_worker_id(worker_id_);
  if (job_thread_ != nullptr) {
    req.set_job(assignment_.job());
    req.set_generation(assignment_.generation());
    const GrpcRingTransport::LinkTiming link = collective_.CurrentLink();
    const WorkerMetrics::RecentWork work = metrics_.Recent();
    auto* t = req.mutable_timing();
    t->set_ring_bytes(link.bytes);
    t->set_ring_seconds(link.seconds);
    t->set_steps(work.steps);
    t->set_compute_seconds(work.compute_seconds);
    const GrpcRingTransport::Wait wait = collective_.CurrentWait();
    if (wait.waiting && wait.seconds >= 1.0) {
      auto* w = req.mutable_wait();
      w->set_from_rank(wait.from_rank);
      w->set_step(wait.tag.step);
      w->set_bucket(wait.tag.bucket);
      w->set_seconds(wait.seconds);
    }
  }
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  HeartbeatResponse resp;
  absl::Status s = stubs_->Run([&](CoordinatorStubs::Stub* stub) {
    return FromGrpc(stub->Heartbeat(&context, req, &resp),
                    absl::StrCat("Heartbeat to ", stubs_->address()));
  });
  if (absl::IsFailedPrecondition(s)) {
    if (job_thread_ != nullptr) StopJob(std::string(s.message()));
    return s;
  }
  if (absl::IsNotFound(s)) {
    health_.SetReady(false);
    metrics_.SetRegistered(false);
    Log(absl::StrCat(s.message(), "; registering again"));
    if (job_thread_ != nullptr) {
      StopJob("the coordinator dropped this worker from the job");
      // Its collectives are aborted: it ends at once, keeping its state,
      // which the registration then offers for the job's next generation.
      const auto give_up =
          std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (!job_done_ && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      ReapJob();
    }
    s = Register();
    // A newer process took this worker's name: this one stops.
    if (absl::IsFailedPrecondition(s)) return s;
    if (!s.ok()) Log(s.ToString());
    return absl::OkStatus();
  }
  if (!s.ok()) {
    if (!coordinator_down_logged_) Log(std::string(s.message()));
    coordinator_down_logged_ = true;
    return absl::OkStatus();
  }
  coordinator_down_logged_ = false;
  metrics_.HeartbeatAnswered();
  if (resp.command() == HeartbeatResponse::RUN && job_thread_ == nullptr &&
      !ShuttingDown()) {  // draining: no new job, but a STOP still counts
    StartJob(resp.assignment());
  } else if (resp.command() == HeartbeatResponse::STOP &&
             job_thread_ != nullptr &&
             resp.assignment().job() == assignment_.job()) {
    if (!job_stop_) {
      Log(absl::StrFormat("stopping job %s: %s", assignment_.job(),
                          resp.reason()));
    }
    StopJob(resp.reason());
  } else if (resp.regroup() && job_thread_ != nullptr && !job_regroup_) {
    Log(absl::StrFormat("job %s: workers join; this generation ends after "
                        "the next step",
                        assignment_.job()));
    job_regroup_ = true;
  }
  return absl::OkStatus();
}

absl::Status WorkerDaemon::StartOpsEndpoints() {
  if (!o_.http.empty()) {
    ASSIGN_OR_RETURN(
        http_,
        HttpServer::Start(o_.http, "--http",
                          {{"/metrics", [this](const auto&) {
                              HttpReply r;
                              r.content_type =
                                  "text/plain; version=0.0.4; charset=utf-8";
                              r.body = metrics_.Text();
                              return r;
                            }}}));
    Log(absl::StrCat("metrics on http://", http_->address(), "/metrics"));
  }
  return absl::OkStatus();
}

absl::Status WorkerDaemon::Run() {
  collective_.SetLog(o_.log);
  if (!o_.step_times.empty()) {
    RETURN_IF_ERROR(CheckStepTimesFile(o_.step_times));
  }
  DaemonServerOptions serve;
  serve.listen = o_.listen;
  serve.tls = o_.tls;
  // A worker's collective port: no verified certificate, no connection.
  serve.client_certificates = ClientCertificates::kRequireAndVerify;
  serve.health_listen = o_.health_listen;
  ASSIGN_OR_RETURN(std::unique_ptr<DaemonServer> server,
                   DaemonServer::Start(serve, {&collective_, &kept_service_},
                                       &health_));
  if (!server->health_address().empty()) {
    Log(absl::StrCat("gRPC health (plaintext, for probes) on ",
                     server->health_address()));
  }
  address_ = AdvertisedAddress(o_.advertise, server->address());
  // Else the peers that dial it refuse the handshake, and the job stalls
  // on a ring connection that fails for a reason only their stderr says.
  RETURN_IF_ERROR(CheckCertificateNames(o_.tls, address_));
  if (!o_.tls.enabled() && !IsLoopbackAddress(o_.listen)) {
    Log(absl::StrCat("warning: collective service listening on ", address_,
                     " without TLS: anyone who can reach it can inject data "
                     "into this worker's all-reduce"));
  }
  RETURN_IF_ERROR(StartOpsEndpoints());
  stubs_ = std::make_unique<CoordinatorStubs>(
      absl::StrSplit(o_.coordinator, ','), o_.tls);
  absl::Status s = Register();
  while (s.ok() && !ShuttingDown()) {
    ReapJob();  // first, so a finished job is not reported as running
    s = Heartbeat();
    if (!s.ok()) break;
    // Short sleeps so a shutdown or a finished job is noticed quickly.
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::duration<double>(heartbeat_seconds_);
    while (!ShuttingDown() && std::chrono::steady_clock::now() < until &&
           !(job_thread_ != nullptr && job_done_)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  health_.ShutDown();
  if (job_thread_ != nullptr && ShuttingDown() && !job_done_) {
    DrainJob();
  } else if (job_thread_ != nullptr) {
    AnnounceLeaving();
    StopJob("the worker is shutting down");
    job_thread_->join();
    job_thread_.reset();
  } else if (ShuttingDown() && !worker_id_.empty()) {
    AnnounceLeaving();  // idle: leave the membership at once
  }
  server->Shutdown();
  if (absl::IsCancelled(s)) return absl::OkStatus();
  return s;
}

}  // namespace worker_internal

absl::Status RunWorker(const WorkerOptions& options) {
  KeepMessageBuffersResident();
  worker_internal::WorkerDaemon daemon(options);
  return daemon.Run();
}

}  // namespace lockstep
