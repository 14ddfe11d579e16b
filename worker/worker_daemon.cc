// Worker daemon: collective server, registration, heartbeat loop, and the
// thread that runs the current assignment.
#include "worker/worker_daemon.h"

#include <unistd.h>

#include <chrono>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "core/status_macros.h"
#include "core/version.h"
#include "proto/cluster.grpc.pb.h"
#include "proto/rpc_util.h"
#include "worker/grpc_transport.h"
#include "worker/job_runner.h"

namespace lockstep {
namespace {

using lockstep::v1::HeartbeatResponse;

std::string HostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

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

  const WorkerOptions& o_;
  std::string address_;
  CollectiveService collective_;
  std::unique_ptr<lockstep::v1::Coordinator::Stub> stub_;
  std::string worker_id_;
  double heartbeat_seconds_ = 1.0;
  bool coordinator_down_logged_ = false;

  // The running job.
  std::unique_ptr<std::thread> job_thread_;
  std::atomic<bool> job_done_{false};
  std::atomic<bool> job_stop_{false};
  lockstep::v1::Assignment assignment_;
  RunnerContext runner_;
};

absl::Status WorkerDaemon::Register() {
  lockstep::v1::RegisterRequest req;
  req.set_protocol_version(o_.protocol_version >= 0 ? o_.protocol_version
                                                    : kProtocolVersion);
  req.set_host(HostName());
  req.set_pid(getpid());
  req.set_collective_address(address_);
  req.set_replicas(o_.replicas);
  req.add_devices(absl::StrCat("cpu:", o_.replicas));
  req.set_version(kVersion);
  req.set_name(o_.name.empty() ? address_ : o_.name);
  while (!ShuttingDown()) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(5));
    lockstep::v1::RegisterResponse resp;
    absl::Status s = AddTlsHint(
        FromGrpc(stub_->Register(&context, req, &resp),
                 absl::StrCat("Register with ", o_.coordinator)),
        o_.tls, "the coordinator", "--tls-cert, --tls-key and --tls-ca");
    if (s.ok()) {
      worker_id_ = resp.worker_id();
      heartbeat_seconds_ = resp.heartbeat_interval_seconds() > 0
                               ? resp.heartbeat_interval_seconds()
                               : 1.0;
      coordinator_down_logged_ = false;
      Log(absl::StrFormat(
          "registered with %s as %s (collective service %s, %d replicas%s)",
          o_.coordinator, worker_id_, address_, o_.replicas,
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

void WorkerDaemon::StartJob(const lockstep::v1::Assignment& a) {
  assignment_ = a;
  job_done_ = false;
  job_stop_ = false;
  runner_.worker_id = worker_id_;
  runner_.coordinator = stub_.get();
  runner_.collective = &collective_;
  runner_.threads = o_.threads;
  runner_.lanes = o_.lanes;
  runner_.tls = o_.tls;
  runner_.stop = &job_stop_;
  runner_.log = o_.log;
  Log(absl::StrFormat("starting job %s generation %d as rank %d of %d", a.job(),
                      a.generation(), a.rank(), a.world_size()));
  job_thread_ = std::make_unique<std::thread>([this] {
    absl::Status s = RunAssignment(assignment_, runner_);
    Log(s.ok() ? absl::StrFormat("job %s: my part is done", assignment_.job())
               : absl::StrFormat("job %s ended: %s", assignment_.job(),
                                 s.ToString()));
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
  lockstep::v1::FinishResponse resp;
  absl::Status s = FromGrpc(stub_->Finish(&context, req, &resp),
                            "telling the coordinator this worker leaves");
  Log(s.ok() ? absl::StrFormat("left job %s (generation %d)", assignment_.job(),
                               assignment_.generation())
             : absl::StrCat("warning: ", s.message()));
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

absl::Status WorkerDaemon::Heartbeat() {
  lockstep::v1::HeartbeatRequest req;
  req.set_worker_id(worker_id_);
  if (job_thread_ != nullptr) {
    req.set_job(assignment_.job());
    req.set_generation(assignment_.generation());
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
  absl::Status s = FromGrpc(stub_->Heartbeat(&context, req, &resp),
                            absl::StrCat("Heartbeat to ", o_.coordinator));
  if (absl::IsFailedPrecondition(s)) {
    if (job_thread_ != nullptr) StopJob(std::string(s.message()));
    return s;
  }
  if (absl::IsNotFound(s)) {
    Log(absl::StrCat(s.message(), "; registering again"));
    if (job_thread_ != nullptr) {
      StopJob("the coordinator dropped this worker from the job");
    }
    s = Register();
    if (!s.ok()) Log(s.ToString());
    return absl::OkStatus();
  }
  if (!s.ok()) {
    if (!coordinator_down_logged_) Log(std::string(s.message()));
    coordinator_down_logged_ = true;
    return absl::OkStatus();
  }
  coordinator_down_logged_ = false;
  if (resp.command() == HeartbeatResponse::RUN && job_thread_ == nullptr) {
    StartJob(resp.assignment());
  } else if (resp.command() == HeartbeatResponse::STOP &&
             job_thread_ != nullptr &&
             resp.assignment().job() == assignment_.job()) {
    if (!job_stop_) {
      Log(absl::StrFormat("stopping job %s: %s", assignment_.job(),
                          resp.reason()));
    }
    StopJob(resp.reason());
  }
  return absl::OkStatus();
}

absl::Status WorkerDaemon::Run() {
  collective_.SetLog(o_.log);
  grpc::ServerBuilder builder;
  ConfigureServer(builder);
  int port = 0;
  builder.AddListeningPort(
      o_.listen,
      MakeServerCredentials(o_.tls, ClientCertificates::kRequireAndVerify),
      &port);
  builder.RegisterService(&collective_);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("--listen ", o_.listen,
                     ": cannot listen there (in use or not a "
                     "local address?)"));
  }
  if (!o_.advertise.empty()) {
    address_ = o_.advertise;
  } else {
    const std::string host = o_.listen.substr(0, o_.listen.rfind(':'));
    address_ = absl::StrCat(host, ":", port);
  }
  if (!o_.tls.enabled() && !IsLoopbackAddress(o_.listen)) {
    Log(absl::StrCat("warning: collective service listening on ", address_,
                     " without TLS: anyone who can reach it can inject data "
                     "into this worker's all-reduce"));
  }
  stub_ =
      lockstep::v1::Coordinator::NewStub(MakeChannel(o_.coordinator, o_.tls));
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
  if (job_thread_ != nullptr) {
    // Say so before the ring notices: a neighbour's broken stream would
    // otherwise be reported first, as if this worker had crashed.
    AnnounceLeaving();
    StopJob("the worker is shutting down");
    job_thread_->join();
    job_thread_.reset();
  }
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (absl::IsCancelled(s)) return absl::OkStatus();
  return s;
}

}  // namespace

absl::Status RunWorker(const WorkerOptions& options) {
  KeepMessageBuffersResident();
  WorkerDaemon daemon(options);
  return daemon.Run();
}

}  // namespace lockstep
