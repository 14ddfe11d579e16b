// The `train` verb: parse flags, load and validate the job, run the local
// trainer with progress on stdout, stop cleanly on SIGINT/SIGTERM.
#include "client/train_command.h"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "client/cli_flags.h"
#include "client/device_flags.h"
#include "core/job/job_spec.h"
#include "core/train/local_training.h"

namespace lockstep {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};

void OnSignal(int sig) {
  if (g_stop.exchange(true)) {
    // A second signal: stop now, without the checkpoint.
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
  g_signal.store(sig);
}

int Fail(const absl::Status& status) {
  std::cerr << "lockstep train: error: " << status.message() << std::endl;
  return status.code() == absl::StatusCode::kInvalidArgument ||
                 status.code() == absl::StatusCode::kNotFound
             ? 2
             : 1;
}

}  // namespace

const char kTrainUsage[] =
    "usage: lockstep train JOB.json [--storage DIR] [--threads N] "
    "[--devices LIST] [--no-resume] [--stop-after-steps N] [--data-dir DIR]\n"
    "  --storage DIR          results under DIR/jobs/NAME/ (default "
    "./lockstep_storage)\n"
    "  --threads N            compute threads (default: every core)\n"
    "  --devices LIST         cuda:0,cuda:1: one GPU per replica of the job "
    "(--config=cuda build);\n"
    "                         cpu (default): CPU replicas\n"
    "  --data-dir DIR         resolve the job's relative data paths against "
    "DIR\n"
    "                         (default: the job file's folder)\n"
    "  --no-resume            start over; earlier checkpoints are moved "
    "aside, not deleted\n"
    "  --stop-after-steps N   checkpoint and stop once N global steps are "
    "done\n";

int RunTrainCommand(const std::vector<std::string>& args) {
  absl::StatusOr<ParsedFlags> flags = ParseFlags(
      args, {"storage", "threads", "stop-after-steps", "data-dir", "devices"},
      {"no-resume", "help"});
  if (!flags.ok()) {
    std::cerr << "lockstep train: " << flags.status().message() << "\n"
              << kTrainUsage;
    return 2;
  }
  if (flags->Has("help")) {
    std::cout << kTrainUsage;
    return 0;
  }
  if (flags->positional.size() != 1) {
    std::cerr << "lockstep train: expected one job file, got "
              << flags->positional.size() << "\n"
              << kTrainUsage;
    return 2;
  }
  absl::StatusOr<int64_t> threads = flags->GetInt("threads", 0);
  if (!threads.ok()) return Fail(threads.status());
  if (*threads < 0 || *threads > 1024) {
    return Fail(absl::InvalidArgumentError(
        "--threads: must be between 0 (every core) and 1024"));
  }
  absl::StatusOr<int64_t> stop_after = flags->GetInt("stop-after-steps", -1);
  if (!stop_after.ok()) return Fail(stop_after.status());
  if (flags->Has("stop-after-steps") && *stop_after < 0) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "--stop-after-steps: must be 0 or more, got ", *stop_after)));
  }

  absl::StatusOr<JobSpec> spec =
      LoadJobSpec(flags->positional[0], flags->Get("data-dir", ""));
  if (!spec.ok()) return Fail(spec.status());

  TrainOptions options;
  options.storage_dir = flags->Get("storage", "lockstep_storage");
  options.threads = static_cast<int>(*threads);
  // `lockstep train` runs every replica of the job here: CPU replicas unless
  // GPUs are asked for, one each.
  const std::string devices = flags->Get("devices", "cpu");
  if (devices != "cpu") {
    const int64_t replicas = spec->total_replicas();
    absl::StatusOr<DeviceList> list =
        ResolveDevices(devices, static_cast<int>(replicas));
    if (!list.ok()) return Fail(list.status());
    if (list->kind == DeviceKind::kCuda &&
        static_cast<int64_t>(list->cuda_ordinals.size()) != replicas) {
      return Fail(absl::InvalidArgumentError(absl::StrFormat(
          "--devices %s: %d GPUs for the job's %d replicas "
          "(cluster.workers x cluster.replicas_per_worker); one GPU each",
          devices, list->cuda_ordinals.size(), replicas)));
    }
    if (list->kind == DeviceKind::kCpu && list->cpu_replicas != replicas) {
      // The job says how many replicas it has; train runs them all here.
      return Fail(absl::InvalidArgumentError(absl::StrFormat(
          "--devices %s: the job has %d replicas (cluster.workers x "
          "cluster.replicas_per_worker), all run here: give cpu or cpu:%d",
          devices, replicas, replicas)));
    }
    options.cuda_devices = list->cuda_ordinals;
  }
  options.resume = !flags->Has("no-resume");
  options.stop_after_steps = *stop_after;
  options.stop_requested = &g_stop;
  // `lockstep train` is interactive: bare lines, no timestamps.
  options.log = [](const LogRecord& r) { std::cout << r.message << std::endl; };
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);

  absl::StatusOr<TrainResult> result = RunLocalTraining(*spec, options);
  if (!result.ok()) return Fail(result.status());
  if (!result->finished && g_signal.load() != 0) return 128 + g_signal.load();
  return 0;
}

}  // namespace lockstep
