// Job client verbs: flags, one JobClient call, human-readable output.
#include "client/job_commands.h"

#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "client/cli_flags.h"
#include "client/job_client.h"
#include "client/job_command_util.h"
#include "client/tls_flags.h"
#include "client/watch_printer.h"
#include "core/job/job_fields.h"
#include "core/job/job_paths.h"
#include "core/job/job_spec.h"
#include "core/onnx/onnx_import.h"
#include "core/progress.h"

namespace lockstep {
namespace {

namespace v1 = lockstep::v1;

std::string WorkerLine(const v1::WorkerStatus& w) {
  if (!w.alive() && w.pid() == 0 && w.host().empty()) {
    // A rank's worker that was lost before the coordinator restarted: only
    // its id is known.
    return absl::StrFormat(
        "  %s %-4s lost before the coordinator restarted",
        w.rank() >= 0 ? absl::StrCat("rank ", w.rank()) : std::string("idle  "),
        w.worker_id());
  }
  std::string timing;
  if (w.ring_ms_per_mib() > 0) {
    timing = absl::StrFormat("ring in %.1f ms/MiB", w.ring_ms_per_mib());
  }
  if (w.compute_ms_per_step() > 0) {
    absl::StrAppend(
        &timing, timing.empty() ? "" : ", ",
        absl::StrFormat("own work %.1f ms/step", w.compute_ms_per_step()));
  }
  // The --name it was given (its default, the address, is shown anyway).
  const std::string id =
      w.name().empty() || w.name() == w.worker_id() || w.name() == w.address()
          ? w.worker_id()
          : absl::StrCat(w.worker_id(), " (", w.name(), ")");
  return absl::StrFormat(
      "  %s %-4s %s pid %d  %s  %s  heartbeat %.1fs ago%s%s%s%s",
      w.rank() >= 0 ? absl::StrCat("rank ", w.rank())
      : w.alive()   ? std::string("idle  ")
                    : std::string("      "),
      id, w.host(), w.pid(), w.address(),
      absl::StrCat(w.replicas(), " replicas"), w.heartbeat_age_seconds(),
      w.alive() ? "" : "  LOST",
      w.shard().empty() ? "" : "\n      " + w.shard(),
      w.waiting().empty() ? "" : "\n      waiting: " + w.waiting(),
      timing.empty() ? "" : "\n      recently: " + timing);
}

// "38.2 KiB", "54.8 MiB", "1.3 GiB".
std::string Bytes(int64_t n) {
  if (n < (int64_t{1} << 20)) return absl::StrFormat("%.1f KiB", n / 1024.0);
  if (n < (int64_t{1} << 30)) {
    return absl::StrFormat("%.1f MiB", n / 1048576.0);
  }
  return absl::StrFormat("%.1f GiB", n / 1073741824.0);
}

void PrintStatus(const v1::JobStatus& s) {
  std::cout << absl::StrFormat("job %s: %s", s.name(), StateWords(s));
  if (s.generation() > 0) {
    std::cout << absl::StrFormat(" (generation %d)", s.generation());
  }
  if (s.restarts() > 0) {
    std::cout << absl::StrFormat(" after %d of %d restarts", s.restarts(),
                                 s.max_restarts());
  }
  std::cout << "\n";
  if (!s.message().empty()) std::cout << "  " << s.message() << "\n";
  // Unless the message said it already (no countdown to add).
  if (const std::string w = WaitingLine(s);
      !w.empty() && !absl::StartsWith(s.message(), w)) {
    std::cout << "  " << w << "\n";
  }
  if (s.has_straggler()) {
    std::cout << "  straggler: " << s.straggler().text() << "\n";
  }
  if (s.state() == v1::RUNNING || (!Waiting(s) && s.step() > 0)) {
    std::cout << "  " << ProgressLine(s) << "\n";
  } else if (s.step() > 0) {
    // Generation g's figures while none runs: no speed, no ETA.
    std::cout << absl::StrFormat(
        "  last progress (generation %d, not running now): [%s] step %d/%d  "
        "loss %.4f  acc %.4f\n",
        s.generation(), s.name(), s.step(), s.total_steps(), s.loss(),
        s.accuracy());
  }
  if (!s.checkpoint_path().empty()) {
    std::cout << "  last checkpoint: " << s.checkpoint_path() << "\n";
  }
  if (!s.shard().empty() || s.optimizer_state_bytes() > 0) {
    std::cout << absl::StrFormat(
        "  optimizer state: %s, %s per worker\n",
        s.shard().empty() ? "whole on every worker"
        : s.shard_copies()
            ? "sharded over the workers (cluster.shard " + s.shard() +
                  "), each part also kept by the next worker (cluster.copies)"
            : "sharded over the workers (cluster.shard " + s.shard() + ")",
        Bytes(s.optimizer_state_bytes()));
  }
  if (s.loss_scale() > 0) {
    std::cout << absl::StrFormat(
        "  loss scale: %g (precision fp16; %d skipped on an overflow)\n",
        s.loss_scale(), s.skipped_steps());
  }
  if (!s.storage_path().empty()) {
    std::cout << "  storage: " << s.storage_path() << "\n";
  }
  if (!s.result_path().empty()) {
    std::cout << absl::StrFormat(
        "  test accuracy %.4f  test loss %.4f  fingerprint %s\n  result: %s\n",
        s.test_accuracy(), s.test_loss(), s.fingerprint(), s.result_path());
  }
  for (const v1::MembershipChange& m : s.membership()) {
    std::cout << absl::StrFormat(
        "  membership: generation %d from step %d: %d workers (%d "
        "replicas): %s\n",
        m.generation(), m.from_step(), m.workers(), m.replicas(), m.why());
  }
  if (!s.fenced().empty()) {
    // Sorted by kind: the map's order is not.
    std::map<std::string, int64_t> fenced(s.fenced().begin(), s.fenced().end());
    std::vector<std::string> parts;
    for (const auto& [kind, n] : fenced) {
      parts.push_back(absl::StrFormat("%d %s", n, kind));
    }
    std::cout << "  fenced (refused from other generations): "
              << absl::StrJoin(parts, ", ") << "\n";
  }
  for (const v1::WorkerStatus& w : s.workers()) {
    std::cout << WorkerLine(w) << "\n";
  }
}

int WatchToEnd(const std::string& verb, JobClient& client,
               const std::string& name) {
  WatchPrinter printer(std::cout);
  absl::StatusOr<v1::JobStatus> last =
      client.Watch(name, [&](const v1::JobStatus& s) { printer(s); });
  if (!last.ok()) return FailVerb(verb, last.status());
  std::cout << absl::StrFormat("job %s %s", name, StateName(last->state()))
            << (last->message().empty() ? "" : ": " + last->message())
            << std::endl;
  return last->state() == v1::SUCCEEDED ? 0 : 1;
}

// `lockstep check` and `submit` look for the job's files here unless told
// only the workers see them; then each unchecked path is named on stderr.
absl::Status CheckPaths(const std::string& verb, const JobSpec& spec,
                        const ParsedFlags& f) {
  if (!f.Has("data-on-workers")) {
    RETURN_IF_ERROR(CheckJobPaths(spec));
    // A model brought as ONNX is imported here too, so an op it cannot
    // train is refused now, not on the workers.
    if (!spec.model.onnx_path.empty()) {
      RETURN_IF_ERROR(ImportOnnxModel(spec.model).status());
    }
    return absl::OkStatus();
  }
  std::string unchecked;
  for (const DataPath& p : JobPaths(spec)) {
    absl::StrAppend(&unchecked, unchecked.empty() ? "" : ", ", p.field, " \"",
                    p.path, "\"");
  }
  if (!unchecked.empty()) {
    std::cerr << "lockstep " << verb
              << ": not checked here (--data-on-workers: the workers read "
                 "them): "
              << unchecked << std::endl;
  }
  return absl::OkStatus();
}

// The folder `submit` and `check` resolve the job's relative data paths
// against: --data-dir, else the job file's folder, else (a bare name,
// stdin) the working folder; absolute, since the workers do not share
// this working folder. With --data-on-workers the paths are the workers'
// own: joined to --data-dir or the job file's folder as given (as
// LoadJobSpec does), not made absolute.
absl::StatusOr<std::string> DataBase(const ParsedFlags& f,
                                     const std::string& job_path) {
  const std::string data_dir = f.Get("data-dir", "");
  if (f.Has("data-on-workers")) return data_dir;
  if (!data_dir.empty()) return AbsolutePath(data_dir);
  if (job_path == "-" || job_path.find('/') == std::string::npos) {
    return AbsolutePath(".");
  }
  return AbsolutePath(Dirname(job_path));
}

constexpr char kDataOnWorkersUsage[] =
    "  --data-on-workers  the job's data paths are the workers' alone: do "
    "not look for them here\n              (they are named as not checked); "
    "by default a path missing here is refused\n";

}  // namespace

int RunSubmitCommand(const std::vector<std::string>& args) {
  const std::string usage = absl::StrCat(
      "usage: lockstep submit JOB.json [--coordinator HOST:PORT] [--wait] "
      "[--resume | --restart] [--attach] [--data-dir DIR] "
      "[--data-on-workers] ",
      kSecurityFlags, "\n",
      "  A job's name is its identity: the same spec again returns the job of "
      "that name; another\n  spec is refused, naming the fields that "
      "differ, unless --resume or --restart says what to do.\n"
      "  --wait      stream progress until the job ends; exit 0 only if it "
      "SUCCEEDED\n"
      "  --resume    continue the name's job from its last checkpoint with "
      "this spec (the same\n              model; more epochs, another "
      "learning rate or data are fine)\n"
      "  --restart   start the name's job over; its earlier results are "
      "moved aside, not deleted\n"
      "  --attach    if the coordinator already runs a job of this name (it "
      "resumed it from its\n              journal: a requeued batch job), "
      "follow that job even if its spec differs\n"
      "  --data-dir  resolve the job's relative data paths against DIR "
      "(default: the job file's folder); workers read the resolved paths\n",
      kDataOnWorkersUsage, kClientSecurityUsage);
  absl::StatusOr<ParsedFlags> f = ParseJobVerbFlags(
      args, {"data-dir"},
      {"wait", "attach", "resume", "restart", "data-on-workers"});
  if (!f.ok() || f->Has("help") || f->positional.size() != 1) {
    if (!f.ok())
      std::cerr << "lockstep submit: " << f.status().message() << "\n";
    (f.ok() && f->Has("help") ? std::cout : std::cerr) << usage;
    return f.ok() && f->Has("help") ? 0 : 2;
  }
  if (f->Has("resume") && f->Has("restart")) {
    std::cerr << "lockstep submit: --resume and --restart: give one (continue "
                 "from the checkpoint, or start over)\n";
    return 2;
  }
  const v1::SubmitMode mode = f->Has("resume")    ? v1::SUBMIT_RESUME
                              : f->Has("restart") ? v1::SUBMIT_RESTART
                                                  : v1::SUBMIT_NEW;
  absl::StatusOr<std::string> base = DataBase(*f, f->positional[0]);
  if (!base.ok()) return FailVerb("submit", base.status());
  absl::StatusOr<JobSpec> spec = LoadJobSpec(f->positional[0], *base);
  if (!spec.ok()) return FailVerb("submit", spec.status());
  if (absl::Status s = CheckPaths("submit", *spec, *f); !s.ok()) {
    return FailVerb("submit", s);
  }
  std::unique_ptr<JobClient> client = JobClientFromFlags("submit", *f);
  if (client == nullptr) return 2;
  absl::StatusOr<v1::SubmitResponse> r =
      client->Submit(JobSpecToJson(*spec), mode);
  if (absl::IsAlreadyExists(r.status()) && f->Has("attach")) {
    absl::StatusOr<v1::JobStatus> running = client->Get(spec->name);
    if (!running.ok()) return FailVerb("submit", running.status());
    if (!WatchPrinter::IsEnd(*running)) {
      r = v1::SubmitResponse();
      *r->mutable_status() = *running;
      r->set_existing(true);
    }
  }
  if (!r.ok()) return FailVerb("submit", r.status());
  const v1::JobStatus& s = r->status();
  if (r->existing() && WatchPrinter::IsEnd(s)) {
    // Submitted before with this very spec and ended: its outcome, once.
    std::cout << absl::StrFormat(
                     "job %s was submitted before with this spec and ended "
                     "%s: %s%s",
                     s.name(), StateName(s.state()), s.message(),
                     s.state() == v1::SUCCEEDED
                         ? ""
                         : " (--resume continues it from its last checkpoint, "
                           "--restart starts it over)")
              << std::endl;
    return !f->Has("wait") || s.state() == v1::SUCCEEDED ? 0 : 1;
  }
  if (r->existing()) {
    std::cout << absl::StrFormat(
                     "job %s is already %s at step %d (generation %d): "
                     "following it",
                     s.name(), StateName(s.state()), s.step(), s.generation())
              << std::endl;
  } else {
    std::cout << absl::StrFormat("submitted job %s: %s", s.name(),
                                 StateName(s.state()))
              << (s.message().empty() ? "" : " (" + s.message() + ")")
              << std::endl;
  }
  if (!f->Has("wait")) return 0;
  return WatchToEnd("submit", *client, s.name());
}

int RunCheckCommand(const std::vector<std::string>& args) {
  const std::string usage =
      "usage: lockstep check JOB.json|- [--data-dir DIR] [--data-on-workers]\n"
      "       lockstep check --fields\n"
      "  validates a job as submit does (- reads it from stdin) and prints\n"
      "  the JSON submit would send: defaults filled in, relative data\n"
      "  paths resolved against --data-dir (default: the job file's folder;\n"
      "  for stdin, the working folder); every data path must exist here.\n"
      "  Exit 2 with the error otherwise.\n"
      "  --fields    list every field a job file may hold instead, one per\n"
      "              line (\"layer dense: units\": a field of one layer type,\n"
      "              \"data csv: train_path\": of one data format)\n" +
      std::string(kDataOnWorkersUsage);
  absl::StatusOr<ParsedFlags> f =
      ParseFlags(args, {"data-dir"},
                 std::set<std::string>{"help", "fields", "data-on-workers"});
  if (f.ok() && f->Has("fields") && f->positional.empty()) {
    for (const std::string& field : JobFieldNames()) std::cout << field << "\n";
    return 0;
  }
  if (!f.ok() || f->Has("help") || f->positional.size() != 1 ||
      f->Has("fields")) {
    if (!f.ok())
      std::cerr << "lockstep check: " << f.status().message() << "\n";
    (f.ok() && f->Has("help") ? std::cout : std::cerr) << usage;
    return f.ok() && f->Has("help") ? 0 : 2;
  }
  absl::StatusOr<std::string> base = DataBase(*f, f->positional[0]);
  if (!base.ok()) return FailVerb("check", base.status());
  absl::StatusOr<JobSpec> spec;
  if (f->positional[0] == "-") {
    std::ostringstream text;
    text << std::cin.rdbuf();
    spec = ParseJobSpec(text.str(), *base);
  } else {
    spec = LoadJobSpec(f->positional[0], *base);
  }
  if (!spec.ok()) return FailVerb("check", spec.status());
  if (absl::Status s = CheckPaths("check", *spec, *f); !s.ok()) {
    return FailVerb("check", s);
  }
  std::cout << JobSpecToJson(*spec) << std::endl;
  return 0;
}

int ListCommandAs(const std::string& verb,
                  const std::vector<std::string>& args);

int RunStatusCommand(const std::vector<std::string>& args) {
  const std::string usage = absl::StrCat(
      "usage: lockstep status [JOB] [--coordinator HOST:PORT] ", kSecurityFlags,
      "\n"
      "  one job in detail (state, generation, step, workers with ranks, "
      "hosts, heartbeats, shards), or every job and worker\n",
      kClientSecurityUsage);
  absl::StatusOr<ParsedFlags> f = ParseJobVerbFlags(args, {}, {});
  if (!f.ok() || f->Has("help") || f->positional.size() > 1) {
    if (!f.ok())
      std::cerr << "lockstep status: " << f.status().message() << "\n";
    (f.ok() && f->Has("help") ? std::cout : std::cerr) << usage;
    return f.ok() && f->Has("help") ? 0 : 2;
  }
  if (f->positional.empty()) return ListCommandAs("status", args);
  std::unique_ptr<JobClient> client = JobClientFromFlags("status", *f);
  if (client == nullptr) return 2;
  absl::StatusOr<v1::JobStatus> s = client->Get(f->positional[0]);
  if (!s.ok()) return FailVerb("status", s.status());
  PrintStatus(*s);
  return 0;
}

int RunWatchCommand(const std::vector<std::string>& args) {
  const std::string usage = absl::StrCat(
      "usage: lockstep watch JOB [--coordinator HOST:PORT] ", kSecurityFlags,
      "\n"
      "  streams progress until the job ends; exit 0 only if it SUCCEEDED\n",
      kClientSecurityUsage);
  absl::StatusOr<ParsedFlags> f = ParseJobVerbFlags(args, {}, {});
  if (!f.ok() || f->Has("help") || f->positional.size() != 1) {
    if (!f.ok())
      std::cerr << "lockstep watch: " << f.status().message() << "\n";
    (f.ok() && f->Has("help") ? std::cout : std::cerr) << usage;
    return f.ok() && f->Has("help") ? 0 : 2;
  }
  std::unique_ptr<JobClient> client = JobClientFromFlags("watch", *f);
  if (client == nullptr) return 2;
  return WatchToEnd("watch", *client, f->positional[0]);
}

// `list`, or `status` without a job, with the verb the user typed in its
// errors.
int ListCommandAs(const std::string& verb,
                  const std::vector<std::string>& args) {
  const std::string usage =
      absl::StrCat("usage: lockstep list [--coordinator HOST:PORT] ",
                   kSecurityFlags, "\n", kClientSecurityUsage);
  absl::StatusOr<ParsedFlags> f = ParseJobVerbFlags(args, {}, {});
  if (!f.ok() || f->Has("help") || !f->positional.empty()) {
    if (!f.ok()) {
      std::cerr << "lockstep " << verb << ": " << f.status().message() << "\n";
    }
    (f.ok() && f->Has("help") ? std::cout : std::cerr) << usage;
    return f.ok() && f->Has("help") ? 0 : 2;
  }
  std::unique_ptr<JobClient> client = JobClientFromFlags(verb, *f);
  if (client == nullptr) return 2;
  absl::StatusOr<v1::ListJobsResponse> l = client->List();
  if (!l.ok()) return FailVerb(verb, l.status());
  std::cout << absl::StrFormat("%-20s %-10s %4s %15s %9s  %s\n", "JOB", "STATE",
                               "GEN", "STEP", "TEST_ACC", "MESSAGE");
  for (const v1::JobStatus& j : l->jobs()) {
    std::cout << absl::StrFormat(
        "%-20s %-10s %4d %15s %9s  %s\n", j.name(), StateName(j.state()),
        j.generation(), absl::StrCat(j.step(), "/", j.total_steps()),
        j.result_path().empty() ? "-"
                                : absl::StrFormat("%.4f", j.test_accuracy()),
        j.message());
  }
  std::cout << absl::StrFormat("workers: %d\n", l->workers_size());
  for (const v1::WorkerStatus& w : l->workers()) {
    std::cout << WorkerLine(w) << (w.job().empty() ? "" : "  job " + w.job())
              << "\n";
  }
  return 0;
}

int RunListCommand(const std::vector<std::string>& args) {
  return ListCommandAs("list", args);
}

int RunCancelCommand(const std::vector<std::string>& args) {
  const std::string usage =
      absl::StrCat("usage: lockstep cancel JOB [--coordinator HOST:PORT] ",
                   kSecurityFlags, "\n", kClientSecurityUsage);
  absl::StatusOr<ParsedFlags> f = ParseJobVerbFlags(args, {}, {});
  if (!f.ok() || f->Has("help") || f->positional.size() != 1) {
    if (!f.ok())
      std::cerr << "lockstep cancel: " << f.status().message() << "\n";
    (f.ok() && f->Has("help") ? std::cout : std::cerr) << usage;
    return f.ok() && f->Has("help") ? 0 : 2;
  }
  std::unique_ptr<JobClient> client = JobClientFromFlags("cancel", *f);
  if (client == nullptr) return 2;
  absl::StatusOr<v1::JobStatus> s = client->Cancel(f->positional[0]);
  if (!s.ok()) return FailVerb("cancel", s.status());
  std::cout << absl::StrFormat("job %s: %s", s->name(), StateName(s->state()))
            << (s->message().empty() ? "" : " (" + s->message() + ")")
            << std::endl;
  return 0;
}

}  // namespace lockstep
