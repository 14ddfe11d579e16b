// Coordinator server: bind, serve both services, tick, shut down cleanly.
#include "coordinator/server.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <iostream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "coordinator/etcd_client.h"
#include "coordinator/etcd_journal_store.h"
#include "coordinator/job_files.h"
#include "coordinator/leader_lease.h"
#include "coordinator/ops_endpoints.h"
#include "coordinator/services.h"
#include "rpc/daemon_server.h"
#include "rpc/health_service.h"
#include "rpc/http_server.h"
#include "rpc/rpc_util.h"

namespace lockstep {
namespace {

// STORAGE/coordinator/lock, held (a POSIX record lock, which NFS carries
// between hosts) for the coordinator's life: two coordinators on one
// storage (two batch jobs given the same folder, a restarted pod beside its
// old self) would overwrite each other's journal and checkpoints. The
// holder's pid, host and start time are in the file for the error.
class StorageLock {
 public:
  // Who holds the lock at `path`, as its holder wrote it ("pid N on HOST
  // since TIME"), else "another process".
  static std::string LockHolder(const std::string& path) {
    absl::StatusOr<std::string> text = ReadFile(path);
    if (text.ok() && !text->empty() && text->size() < 512) {
      return std::string(absl::StripAsciiWhitespace(*text));
    }
    return "another process";
  }

  ~StorageLock() {
    if (fd_ >= 0) close(fd_);
  }
  absl::Status Acquire(const std::string& storage) {
    const std::string dir = JoinPath(storage, "coordinator");
    RETURN_IF_ERROR(AnnotateStatus(MakeDirs(dir), "--storage"));
    const std::string path = JoinPath(dir, "lock");
    fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) return ErrnoToStatus("open", path, errno);
    struct flock lk = {};
    lk.l_type = F_WRLCK;
    lk.l_whence = SEEK_SET;
    if (fcntl(fd_, F_SETLK, &lk) != 0) {
      const int err = errno;
      if (err != EACCES && err != EAGAIN) {
        return ErrnoToStatus("lock", path, err);
      }
      const std::string holder = LockHolder(path);
      return absl::FailedPreconditionError(absl::StrCat(
          "--storage ", storage, " is in use by another coordinator (", holder,
          "): two coordinators on one storage would overwrite each other's "
          "journal; stop that one or give this one its own --storage"));
    }
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    const std::string who =
        absl::StrFormat("pid %d on %s since %s", getpid(), host,
                        absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::Now(),
                                         absl::UTCTimeZone()));
    if (ftruncate(fd_, 0) != 0 || pwrite(fd_, who.data(), who.size(), 0) !=
                                      static_cast<ssize_t>(who.size())) {
      return ErrnoToStatus("write", path, errno);
    }
    // Coordinators with --etcd keep their journal in etcd and take no
    // lock: one without would run beside them, with a journal of its own.
    const std::string marker = JoinPath(dir, "etcd");
    absl::StatusOr<std::string> etcd = ReadFile(marker);
    if (etcd.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--storage ", storage, " belongs to coordinators with --etcd (",
          absl::StripAsciiWhitespace(*etcd),
          "): start this one with the same --etcd, or remove ", marker,
          " once every one of them is stopped"));
    }
    return absl::OkStatus();
  }

  // For a coordinator with --etcd (`etcd`: its endpoints and prefix):
  // marks the storage as theirs (STORAGE/coordinator/etcd), then refuses
  // when a coordinator without --etcd holds its lock. In that order, one
  // of two started at once always sees the other.
  absl::Status MarkForEtcd(const std::string& storage,
                           const std::string& etcd) {
    const std::string dir = JoinPath(storage, "coordinator");
    RETURN_IF_ERROR(AnnotateStatus(MakeDirs(dir), "--storage"));
    const std::string marker = JoinPath(dir, "etcd");
    const bool created = !ReadFile(marker).ok();
    if (created) {
      RETURN_IF_ERROR(WriteFileAtomic(marker, etcd + "\n"));
    }
    const std::string path = JoinPath(dir, "lock");
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoToStatus("open", path, errno);
    struct flock lk = {};
    lk.l_type = F_WRLCK;
    lk.l_whence = SEEK_SET;
    const int r = fcntl(fd, F_GETLK, &lk);
    const int err = errno;
    close(fd);
    if (r != 0) return ErrnoToStatus("lock", path, err);
    if (lk.l_type == F_UNLCK) return absl::OkStatus();
    if (created) unlink(marker.c_str());
    const std::string holder = LockHolder(path);
    return absl::FailedPreconditionError(absl::StrCat(
        "--storage ", storage, " is in use by a coordinator without --etcd (",
        holder,
        "): it would run beside these with a journal of its own; stop it "
        "first"));
  }

 private:
  int fd_ = -1;
};

}  // namespace

absl::Status RunCoordinator(const ServerOptions& options) {
  RETURN_IF_ERROR(AnnotateStatus(
      MakeDirs(JoinPath(options.coordinator.storage_dir, "jobs")),
      "--storage"));
  const bool ha = !options.etcd.empty();
  StorageLock storage_lock;
  // With etcd the coordinators share the storage, and etcd fences their
  // journal writes; a lock held by a paused old leader would stop the
  // next one.
  if (!ha) {
    RETURN_IF_ERROR(storage_lock.Acquire(options.coordinator.storage_dir));
  } else {
    RETURN_IF_ERROR(storage_lock.MarkForEtcd(
        options.coordinator.storage_dir,
        absl::StrCat(absl::StrJoin(options.etcd, ","), " prefix ",
                     options.etcd_prefix)));
  }
  CoordinatorOptions coordinator_options = options.coordinator;
  std::unique_ptr<EtcdClient> etcd;
  if (ha) {
    EtcdOptions eo;
    eo.endpoints = options.etcd;
    eo.tls = options.etcd_tls;
    // Under half the lease's TTL: a journal write (made under the state
    // lock) does not wait out the lease on a member that hangs.
    eo.call_timeout = absl::Milliseconds(800);
    ASSIGN_OR_RETURN(etcd, EtcdClient::Connect(eo));
  }
  absl::StatusOr<std::string> storage_id =
      LoadOrCreateStorageId(options.coordinator.storage_dir);
  if (!storage_id.ok()) return AnnotateStatus(storage_id.status(), "--storage");
  coordinator_options.storage_id = *storage_id;
  std::unique_ptr<LeaderLease> lease;
  if (ha) {
    LeaderLeaseOptions lo;
    lo.key = absl::StrCat(options.etcd_prefix, "/leader");
    lo.log = options.coordinator.log;
    lease = std::make_unique<LeaderLease>(etcd.get(), lo);
    coordinator_options.journal_store = std::make_shared<EtcdJournalStore>(
        etcd.get(), lease.get(), options.etcd_prefix);
  }
  Coordinator coordinator(coordinator_options);
  HealthService health;
  Authorizer auth(
      {options.tls.enabled(), options.token, options.coordinator.log});
  JobServiceImpl jobs(&coordinator, &auth, options.shutdown);
  ClusterServiceImpl cluster(&coordinator, &auth);
  DaemonServerOptions serve;
  serve.listen = options.listen;
  serve.tls = options.tls;
  serve.client_certificates = ClientCertificates::kRequestAndVerify;
  serve.health_listen = options.health_listen;
  ASSIGN_OR_RETURN(std::unique_ptr<DaemonServer> server,
                   DaemonServer::Start(serve, {&jobs, &cluster}, &health));
  std::unique_ptr<HttpServer> http;
  if (!options.http.empty()) {
    ASSIGN_OR_RETURN(http, HttpServer::Start(options.http, "--http",
                                             CoordinatorRoutes(&coordinator)));
  }
  const std::string& address = server->address();
  if (ha) {
    // A standby: health NOT_SERVING (a Kubernetes Service sends nothing
    // here) and every call UNAVAILABLE naming the leader, until it leads.
    if (options.coordinator.log) {
      // Its ports are said now: a standby serves its dashboard and health
      // (NOT_SERVING) before it leads, and the address file waits for that.
      options.coordinator.log(absl::StrCat(
          "coordinator on ", address, ": campaigning through etcd ",
          absl::StrJoin(options.etcd, ","), " (key ", lease->key(), ")",
          http != nullptr
              ? absl::StrCat("; dashboard on http://", http->address(), "/")
              : "",
          server->health_address().empty()
              ? ""
              : absl::StrCat("; gRPC health on ", server->health_address())));
    }
    absl::StatusOr<int64_t> term = lease->Campaign(
        AdvertisedAddress(options.advertise, address), *options.shutdown);
    if (!term.ok()) {
      server->Shutdown();
      return absl::OkStatus();  // shut down while standing by
    }
  }
  // Workers heartbeating under their old ids must find them, and jobs must
  // not be resubmittable as new: until the journal is replayed, health says
  // NOT_SERVING and every other call is answered UNAVAILABLE.
  RETURN_IF_ERROR(coordinator.LoadJournal());
  health.SetReady(true);
  // Once serving (scripts wait for it): the journal replayed, leading.
  if (!options.address_file.empty()) {
    RETURN_IF_ERROR(
        AnnotateStatus(WriteFileAtomic(options.address_file, address + "\n"),
                       "--address-file"));
  }
  if (options.coordinator.log) {
    const auto& log = options.coordinator.log;
    log(absl::StrCat(
        "coordinator listening on ", address, ", storage ",
        options.coordinator.storage_dir,
        options.tls.enabled() ? ", TLS (workers need a certificate signed by "
                                "--tls-ca)"
                              : ", no TLS",
        options.token.empty() ? "" : ", bearer token required for jobs"));
    if (http != nullptr) {
      log(absl::StrCat("dashboard on http://", http->address(),
                       "/ (metrics at /metrics)"));
    }
    if (!server->health_address().empty()) {
      log(absl::StrCat("gRPC health (plaintext, for probes) on ",
                       server->health_address()));
    }
    if (!options.tls.enabled() && !IsLoopbackAddress(options.listen)) {
      log(absl::StrCat("warning: listening on ", address,
                       " without TLS: anyone who can reach it can submit "
                       "jobs and join the ring",
                       options.token.empty()
                           ? ""
                           : " (and the bearer token crosses the network "
                             "in clear text)"));
    }
    if (http != nullptr && (options.tls.enabled() || !options.token.empty()) &&
        !IsLoopbackAddress(options.http)) {
      log(absl::StrCat(
          "warning: the dashboard and /metrics on http://", http->address(),
          " have neither TLS nor the bearer token: anyone who can reach it "
          "reads every job's events, storage paths and workers (bind --http "
          "to 127.0.0.1, or put an authenticating proxy in front)"));
    }
  }
  while (!options.shutdown->load()) {
    coordinator.Tick();
    if (ha) {
      // A leader whose lease lapsed (paused, cut off from etcd) or whose
      // write etcd refused steps down: it exits, and its supervisor
      // starts it again as a standby.
      const std::string why = coordinator.NotServing();
      if (!why.empty()) {
        health.ShutDown();
        const std::string line =
            absl::StrFormat("stepping down: %s (%d journal writes refused)",
                            why.substr(std::string(kNotLeaderPrefix).size()),
                            coordinator.journal_store().refused_writes());
        if (options.coordinator.log) options.coordinator.log(line);
        // At once, without a graceful shutdown: that would end the calls
        // in flight as CANCELLED, which a worker takes as its job's end;
        // a closed connection is UNAVAILABLE, which it retries with the
        // next coordinator.
        std::cout.flush();
        std::cerr << "lockstep coordinator: error: " << line << std::endl;
        _exit(1);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // Probes see NOT_SERVING at once; no new job or generation starts.
  health.ShutDown();
  coordinator.BeginShutdown();
  if (options.shutdown_grace_seconds > 0 &&
      coordinator.views().RunningJobs() > 0) {
    const auto& log = options.coordinator.log;
    if (log) {
      log(absl::StrFormat(
          "shutting down: waiting up to %.0f s for %d running job(s) to "
          "drain (their workers checkpoint and leave); no new jobs",
          options.shutdown_grace_seconds, coordinator.views().RunningJobs()));
    }
    const absl::Time give_up =
        absl::Now() + absl::Seconds(options.shutdown_grace_seconds);
    while (coordinator.views().RunningJobs() > 0 && absl::Now() < give_up) {
      coordinator.Tick();
      absl::SleepFor(absl::Milliseconds(100));
    }
    // The other ranks' Finish and leave follow the first one's at once.
    const absl::Time settle =
        std::min(give_up, absl::Now() + absl::Milliseconds(500));
    while (absl::Now() < settle) {
      coordinator.Tick();
      absl::SleepFor(absl::Milliseconds(100));
    }
    if (log) {
      const int left = coordinator.views().RunningJobs();
      log(left == 0 ? std::string("shutting down: every running job drained")
                    : absl::StrFormat("shutting down: %d job(s) still running "
                                      "after %.0f s; the next coordinator "
                                      "resumes them",
                                      left, options.shutdown_grace_seconds));
    }
  }
  // The last state goes to the journal so that the next coordinator
  // resumes every job from it.
  absl::Status saved = coordinator.SaveJournal();
  if (options.coordinator.log) {
    options.coordinator.log(
        saved.ok() ? absl::StrCat("shutting down: journal written to ",
                                  coordinator.journal_store().Where())
                   : absl::StrCat("error: shutting down without the journal: ",
                                  saved.message()));
  }
  http.reset();
  server->Shutdown();
  return saved;
}

}  // namespace lockstep
