// Coordinator and worker daemons: flags, signal handling, timestamped logs.
#include "client/daemon_commands.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <iostream>
#include <mutex>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "client/cli_flags.h"
#include "client/coordinator_address.h"
#include "client/device_flags.h"
#include "client/tls_flags.h"
#include "coordinator/etcd_client.h"
#include "coordinator/server.h"
#include "core/log.h"
#include "worker/worker_daemon.h"

namespace lockstep {
namespace {

std::atomic<bool> g_shutdown{false};

void OnSignal(int) { g_shutdown.store(true); }

// The operational flags both daemons share (besides --http, whose pages
// differ).
constexpr char kOpsUsage[] =
    "  --health-listen HOST:PORT  a plaintext gRPC port serving only "
    "grpc.health.v1 for Kubernetes probes (the main port serves it too); "
    "services \"\" (ready) and \"liveness\"\n"
    "  --log-format text|json  one line per event (default text); json for "
    "log collectors\n";

int Usage(const std::string& verb, const absl::StatusOr<ParsedFlags>& f,
          const std::string& usage) {
  if (!f.ok())
    std::cerr << "lockstep " << verb << ": " << f.status().message() << "\n";
  const bool help = f.ok() && f->Has("help");
  (help ? std::cout : std::cerr) << usage;
  return help ? 0 : 2;
}

// A flag whose value cannot be used (a partial TLS set, a missing or
// empty file): the message names the flag; exit 2 as for any usage error.
int FlagError(const std::string& verb, const absl::Status& status) {
  std::cerr << "lockstep " << verb << ": " << status.message() << "\n";
  return 2;
}

std::set<std::string> WithOpsFlags(std::set<std::string> flags) {
  flags.insert({"http", "health-listen", "log-format"});
  return flags;
}

// The log for stdout in --log-format's format.
absl::StatusOr<LogFn> LoggerFromFlags(const ParsedFlags& f,
                                      const std::string& component) {
  absl::StatusOr<LogFormat> format =
      ParseLogFormat(f.Get("log-format", "text"));
  if (!format.ok()) return format.status();
  return MakeLogger(component, *format, &std::cout);
}

// --listen as "host:port" (a host alone takes `default_port`; port 0 a
// free one), or `fallback` when not given.
absl::StatusOr<std::string> ListenFlag(const ParsedFlags& f,
                                       const std::string& fallback,
                                       int default_port) {
  if (!f.Has("listen")) return fallback;
  const std::string given = f.Get("listen", "");
  absl::StatusOr<HostPort> hp =
      ParseHostPort(given, absl::StrCat("--listen \"", given, "\""), 0);
  if (!hp.ok()) return hp.status();
  return hp->With(default_port);
}

// --advertise checked ("host" alone or with port 0: the bound port, which
// AdvertisedAddress fills in), or "" when not given.
absl::StatusOr<std::string> AdvertiseFlag(const ParsedFlags& f) {
  if (!f.Has("advertise")) return std::string();
  const std::string given = f.Get("advertise", "");
  absl::StatusOr<HostPort> hp =
      ParseHostPort(given, absl::StrCat("--advertise \"", given, "\""), 0);
  if (!hp.ok()) return hp.status();
  return hp->port ? hp->With(0) : hp->host;
}

}  // namespace

int RunCoordinatorCommand(const std::vector<std::string>& args) {
  const std::string usage = absl::StrCat(
      "usage: lockstep coordinator [--listen HOST:PORT] [--storage DIR] "
      "[--address-file F] [--tls-cert F --tls-key F --tls-ca F] "
      "[--token-file F]\n"
      "  --listen        where clients and workers connect (default "
      "127.0.0.1:7070; port 0 picks a free one); another address without "
      "TLS logs a warning (anyone who can reach it can submit jobs and join "
      "the ring)\n"
      "  --storage       shared storage: DIR/jobs/NAME/{checkpoints,summaries,"
      "result.json} (default ./lockstep_storage)\n"
      "  --address-file  write the bound host:port here once serving\n"
      "  --worker-timeout S  a worker silent this long is lost (default 8)\n"
      "  --hang-timeout S    a rank its ring has waited on this long is hung "
      "and lost (default 30)\n"
      "  Jobs and membership are journaled in STORAGE/coordinator/journal.pb;"
      " a coordinator\n  started again on the same storage resumes them; "
      "SIGTERM writes it and exits.\n"
      "  --shutdown-grace S  after SIGTERM, keep serving workers up to S "
      "seconds while jobs still run,\n                      so workers "
      "signalled at the same moment (a Slurm scancel) commit their\n"
      "                      drain checkpoint; no new jobs meanwhile "
      "(default 0: exit at once)\n",
      "  --http HOST:PORT  the dashboard at /, its JSON at /api/state and "
      "Prometheus metrics at /metrics over HTTP (off unless set)\n"
      "  --etcd URL,...  several coordinators on one storage, one leading "
      "through an etcd lease\n                  (http://host:port or "
      "https://host:port; etcd 3.4+): the others stand by\n"
      "                  and lead within ~3 s when it dies; the journal lives "
      "in etcd\n"
      "  --etcd-prefix P  etcd keys under P (default /lockstep; one per "
      "cluster)\n"
      "  --etcd-ca F     TLS to https:// etcd endpoints: the CA that signed "
      "etcd's certificate\n"
      "  --etcd-cert F   with --etcd-key F: a client certificate for etcd\n"
      "  --etcd-key F    its key\n"
      "  --advertise HOST:PORT  the address standbys name as the leader's "
      "(default: the bound one)\n",
      kOpsUsage, kDaemonTlsUsage,
      "                 with TLS, every worker call needs a client "
      "certificate signed by --tls-ca\n"
      "  --token-file F job commands (submit, status, watch, list, cancel, "
      "pull) must send this bearer token (the file's content, trimmed)\n");
  absl::StatusOr<ParsedFlags> f = ParseFlags(
      args,
      WithTlsFlags(WithOpsFlags(
          {"listen", "storage", "address-file", "worker-timeout",
           "hang-timeout", "shutdown-grace", "token-file", "etcd",
           "etcd-prefix", "etcd-ca", "etcd-cert", "etcd-key", "advertise"})),
      {"help"});
  if (!f.ok() || f->Has("help") || !f->positional.empty()) {
    return Usage("coordinator", f, usage);
  }
  absl::StatusOr<TlsFiles> tls = TlsFromFlags(*f, TlsRole::kDaemon);
  if (!tls.ok()) return FlagError("coordinator", tls.status());
  ServerOptions o;
  o.tls = *tls;
  if (f->Has("token-file")) {
    absl::StatusOr<std::string> token =
        ReadTokenFile("--token-file", f->Get("token-file", ""));
    if (!token.ok()) return FlagError("coordinator", token.status());
    o.token = *token;
    // The secret every job client sends: others on this machine should not
    // read it. Said, not refused (a Kubernetes Secret mounts 0644 files).
    struct stat st;
    const std::string path = f->Get("token-file", "");
    if (stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
      std::cerr << absl::StrFormat(
                       "lockstep coordinator: warning: --token-file \"%s\" "
                       "is readable by others on this machine (mode %04o; "
                       "chmod 600 it)",
                       path, st.st_mode & 07777)
                << std::endl;
    }
  }
  absl::StatusOr<std::string> listen =
      ListenFlag(*f, absl::StrCat("127.0.0.1:", kDefaultCoordinatorPort),
                 kDefaultCoordinatorPort);
  if (!listen.ok()) return FlagError("coordinator", listen.status());
  o.listen = *listen;
  absl::StatusOr<std::string> advertise = AdvertiseFlag(*f);
  if (!advertise.ok()) return FlagError("coordinator", advertise.status());
  o.advertise = *advertise;
  if (f->Has("etcd")) {
    for (const char* flag : {"etcd-ca", "etcd-cert", "etcd-key"}) {
      if (!f->Has(flag)) continue;
      absl::StatusOr<std::string> pem = ReadFile(f->Get(flag, ""));
      if (!pem.ok()) {
        return FlagError(
            "coordinator",
            AnnotateStatus(pem.status(), absl::StrCat("--", flag)));
      }
      std::string& to = std::string(flag) == "etcd-ca"     ? o.etcd_tls.ca
                        : std::string(flag) == "etcd-cert" ? o.etcd_tls.cert
                                                           : o.etcd_tls.key;
      to = *pem;
    }
    absl::StatusOr<std::vector<std::string>> endpoints = ParseEtcdEndpoints(
        f->Get("etcd", ""), !o.etcd_tls.ca.empty(), "--etcd");
    if (!endpoints.ok()) return FlagError("coordinator", endpoints.status());
    o.etcd = *endpoints;
    o.etcd_prefix = f->Get("etcd-prefix", "/lockstep");
    if (o.etcd_prefix.empty() || o.etcd_prefix[0] != '/' ||
        o.etcd_prefix.back() == '/') {
      return FlagError("coordinator",
                       absl::InvalidArgumentError(absl::StrCat(
                           "--etcd-prefix \"", o.etcd_prefix,
                           "\": must start with / and not end with one "
                           "(/lockstep/cluster-a)")));
    }
  } else {
    for (const char* flag :
         {"etcd-prefix", "etcd-ca", "etcd-cert", "etcd-key"}) {
      if (f->Has(flag)) {
        return FlagError("coordinator",
                         absl::InvalidArgumentError(absl::StrCat(
                             "--", flag, " is given but --etcd is not")));
      }
    }
  }
  o.address_file = f->Get("address-file", "");
  o.http = f->Get("http", "");
  o.health_listen = f->Get("health-listen", "");
  absl::StatusOr<LogFn> log = LoggerFromFlags(*f, "coordinator");
  if (!log.ok()) return FlagError("coordinator", log.status());
  o.coordinator.storage_dir = f->Get("storage", "lockstep_storage");
  absl::StatusOr<int64_t> timeout = f->GetInt("worker-timeout", 8);
  if (!timeout.ok() || *timeout < 1) {
    std::cerr << "lockstep coordinator: --worker-timeout: must be an integer "
                 ">= 1 (seconds)\n";
    return 2;
  }
  o.coordinator.worker_timeout_seconds = static_cast<double>(*timeout);
  absl::StatusOr<int64_t> hang = f->GetInt("hang-timeout", 30);
  if (!hang.ok() || *hang < 2) {
    std::cerr << "lockstep coordinator: --hang-timeout: must be an integer "
                 ">= 2 (seconds)\n";
    return 2;
  }
  o.coordinator.hang_timeout_seconds = static_cast<double>(*hang);
  absl::StatusOr<int64_t> grace = f->GetInt("shutdown-grace", 0);
  if (!grace.ok() || *grace < 0 || *grace > 3600) {
    std::cerr << "lockstep coordinator: --shutdown-grace: must be an integer "
                 "0..3600 (seconds)\n";
    return 2;
  }
  o.shutdown_grace_seconds = static_cast<double>(*grace);
  // A stall shows in status before a ring stream's own keepalive (5 s by
  // default) can end it: the report must not race the stream's end.
  o.coordinator.hang_report_seconds =
      std::min(3.0, o.coordinator.hang_timeout_seconds / 2);
  o.coordinator.log = *log;
  // A file-size limit (ulimit -f) then fails the write with EFBIG, which is
  // reported like a full disk, instead of killing the coordinator.
  std::signal(SIGXFSZ, SIG_IGN);
  o.shutdown = &g_shutdown;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  absl::Status s = RunCoordinator(o);
  if (!s.ok()) {
    std::cerr << "lockstep coordinator: error: " << s.message() << std::endl;
    return 1;
  }
  return 0;
}

int RunWorkerCommand(const std::vector<std::string>& args) {
  const std::string usage = absl::StrCat(
      "usage: lockstep worker --coordinator HOST:PORT [--replicas N | "
      "--devices LIST] [--listen HOST:PORT] [--advertise HOST:PORT] "
      "[--threads N] [--tls-cert F --tls-key F --tls-ca F]\n"
      "  --coordinator  HOST:PORT, or several comma-separated (coordinators "
      "in standby behind etcd: the worker follows the leader)\n"
      "  --replicas N   CPU replicas this worker offers (default 1)\n"
      "  --devices      cuda:0,cuda:1 (one replica per GPU; \"cuda\": every "
      "visible GPU; the default in a GPU build on a GPU machine) or cpu:N "
      "(same as --replicas N); GPUs need the --config=cuda build\n"
      "  --listen       the collective service for peers (default "
      "127.0.0.1:0)\n"
      "  --advertise    the address peers dial (default: --listen's host "
      "and the bound port); HOST alone (or HOST:0) takes the bound port\n"
      "  --threads N    compute threads (default: every core)\n"
      "  --lanes N      streams (TCP connections) to the next rank on the "
      "ring, 1..16 (default 2; a job's cluster.ring_streams overrides it)\n"
      "  --name NAME    stable identity (default: the advertised address); a "
      "restarted\n                 process under the same name replaces the "
      "old one\n",
      "  --http HOST:PORT  Prometheus metrics at /metrics over HTTP (off "
      "unless set)\n",
      "  --step-times FILE  append one JSON line per job run here: the "
      "wall-clock end\n                 time (unix seconds) of every step "
      "(benchmarks)\n"
      "  --ring-keepalive-timeout S  a ring stream to the next rank whose "
      "data stays\n                 unacknowledged S seconds is broken and "
      "its rank reported (default 5);\n                 raise it (under "
      "the coordinator's --hang-timeout) to ride through\n"
      "                 partitions that long without a new generation\n",
      kOpsUsage,
      "  SIGTERM: the running job finishes its step and saves a checkpoint "
      "of it with the\n  other ranks, the coordinator is told this worker "
      "leaves, and the worker exits 0.\n",
      kDaemonTlsUsage,
      "                 the certificate is this worker's client certificate "
      "(towards the coordinator and ring peers) and its collective "
      "service's (which then admits only peers signed by --tls-ca); it "
      "must be valid for the --advertise (or --listen) address\n");
  absl::StatusOr<ParsedFlags> f = ParseFlags(
      args,
      WithTlsFlags(WithOpsFlags({"coordinator", "replicas", "devices", "listen",
                                 "advertise", "threads", "lanes", "name",
                                 "step-times", "ring-keepalive-timeout",
                                 "protocol-version-for-testing"})),
      {"help"});
  if (!f.ok() || f->Has("help") || !f->positional.empty() ||
      !f->Has("coordinator")) {
    if (f.ok() && !f->Has("help") && !f->Has("coordinator")) {
      std::cerr << "lockstep worker: --coordinator HOST:PORT is required\n";
    }
    return Usage("worker", f, usage);
  }
  absl::StatusOr<TlsFiles> tls = TlsFromFlags(*f, TlsRole::kDaemon);
  if (!tls.ok()) return FlagError("worker", tls.status());
  WorkerOptions o;
  o.tls = *tls;
  absl::StatusOr<std::string> coordinator =
      NormalizeCoordinatorAddresses(f->Get("coordinator", ""));
  if (!coordinator.ok()) return FlagError("worker", coordinator.status());
  o.coordinator = *coordinator;
  absl::StatusOr<std::string> listen = ListenFlag(*f, "127.0.0.1:0", 0);
  if (!listen.ok()) return FlagError("worker", listen.status());
  o.listen = *listen;
  absl::StatusOr<std::string> advertise = AdvertiseFlag(*f);
  if (!advertise.ok()) return FlagError("worker", advertise.status());
  o.advertise = *advertise;
  o.name = f->Get("name", "");
  o.http = f->Get("http", "");
  o.health_listen = f->Get("health-listen", "");
  o.step_times = f->Get("step-times", "");
  if (f->Has("step-times") && o.step_times.empty()) {
    std::cerr << "lockstep worker: --step-times needs a file path\n";
    return 2;
  }
  absl::StatusOr<LogFn> log = LoggerFromFlags(*f, "worker");
  if (!log.ok()) return FlagError("worker", log.status());
  absl::StatusOr<int64_t> replicas = f->GetInt("replicas", 1);
  absl::StatusOr<int64_t> threads = f->GetInt("threads", 0);
  absl::StatusOr<int64_t> lanes = f->GetInt("lanes", 2);
  absl::StatusOr<int64_t> proto = f->GetInt("protocol-version-for-testing", -1);
  for (const auto* v : {&replicas, &threads, &lanes, &proto}) {
    if (!v->ok()) {
      std::cerr << "lockstep worker: " << v->status().message() << "\n";
      return 2;
    }
  }
  if (*replicas < 1 || *replicas > 1024) {
    std::cerr << "lockstep worker: --replicas must be 1..1024\n";
    return 2;
  }
  if (*threads < 0 || *threads > 1024) {
    std::cerr << "lockstep worker: --threads must be 0 (every core) to 1024\n";
    return 2;
  }
  if (*lanes < 1 || *lanes > 16) {
    std::cerr << "lockstep worker: --lanes must be 1..16\n";
    return 2;
  }
  absl::StatusOr<DeviceList> devices =
      ResolveDevices(f->Get("devices", ""), static_cast<int>(*replicas));
  if (!devices.ok()) return FlagError("worker", devices.status());
  if (f->Has("replicas") && f->Has("devices") &&
      devices->replicas() != *replicas) {
    std::cerr << "lockstep worker: --replicas " << *replicas
              << " and --devices " << f->Get("devices", "") << " ("
              << devices->replicas()
              << " replicas) disagree: give one of them\n";
    return 2;
  }
  *replicas = devices->replicas();
  o.cuda_devices = devices->cuda_ordinals;
  if (*replicas < 1 || *replicas > 1024) {
    std::cerr << "lockstep worker: --devices gives " << *replicas
              << " replicas; a worker runs 1..1024\n";
    return 2;
  }
  o.replicas = static_cast<int>(*replicas);
  o.threads = static_cast<int>(*threads);
  o.lanes = static_cast<int>(*lanes);
  absl::StatusOr<int64_t> keepalive = f->GetInt("ring-keepalive-timeout", 5);
  if (!keepalive.ok() || *keepalive < 1 || *keepalive > 600) {
    std::cerr << "lockstep worker: --ring-keepalive-timeout: must be an "
                 "integer 1..600 (seconds)\n";
    return 2;
  }
  o.ring_keepalive_timeout_ms = static_cast<int>(*keepalive * 1000);
  o.protocol_version = static_cast<int>(*proto);
  o.shutdown = &g_shutdown;
  o.log = *log;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  absl::Status s = RunWorker(o);
  if (!s.ok()) {
    std::cerr << "lockstep worker: error: " << s.message() << std::endl;
    return 1;
  }
  return 0;
}

}  // namespace lockstep
