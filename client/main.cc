// The one lockstep binary: dispatches to a verb (train, coordinator, worker,
// submit, check, status, watch, list, cancel, pull, predict, health, audit,
// version).
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "client/audit_command.h"
#include "client/daemon_commands.h"
#include "client/health_command.h"
#include "client/job_commands.h"
#include "client/predict_command.h"
#include "client/pull_command.h"
#include "client/train_command.h"
#include "core/version.h"

namespace {

constexpr char kUsage[] =
    "usage: lockstep <command> [args]\n"
    "commands:\n"
    "  train JOB.json [--storage DIR]   train a job in this process\n"
    "  predict JOB.json --text TEXT | --image PATH\n"
    "                                   fill the [MASK]s of TEXT (a text job), "
    "or classify\n"
    "                                   images (an image_folder job)\n"
    "  coordinator [--listen H:P] [--storage DIR]\n"
    "                                   run the coordinator (the chief)\n"
    "  worker --coordinator H:P [--replicas N]\n"
    "                                   run a worker daemon\n"
    "  submit JOB.json [--wait]         submit a job to the coordinator\n"
    "  check JOB.json|-                 validate a job; print what submit "
    "sends\n"
    "  status [JOB]                     a job's state, step and workers\n"
    "  watch JOB                        stream a job's progress to its end\n"
    "  list                             every job and worker\n"
    "  cancel JOB                       cancel a pending or running job\n"
    "  pull JOB DEST [--step N]         fetch a job's result, summaries and "
    "a checkpoint\n"
    "  health HOST:PORT                 a daemon's grpc.health.v1 status\n"
    "  audit JOB_DIR                    count the samples a job's steps used "
    "(audit.samples)\n"
    "  version                          print the version\n"
    "  help                             this text\n"
    "Run `lockstep <command> --help` for a command's flags.\n";

int Dispatch(const std::string& verb, const std::vector<std::string>& args);

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil is built with its debug deadlock detection on: every
  // Mutex acquisition then updates a global lock-order graph (seen in
  // profiles of the ring's threads). The tests keep it; the product runs
  // without it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string verb = args[0];
  args.erase(args.begin());
  try {
    return Dispatch(verb, args);
  } catch (const std::bad_alloc&) {
    // The engine reports errors as statuses; memory that runs out inside a
    // container or vector can only throw. One line, as every error.
    std::cerr << "lockstep " << verb
              << ": error: out of memory (std::bad_alloc): the job's model, "
                 "batch or data does not fit in this machine's memory (or "
                 "its limit); a smaller model or batch_size_per_replica, or "
                 "a machine with more"
              << std::endl;
    return 1;
  }
}

namespace {

int Dispatch(const std::string& verb, const std::vector<std::string>& args) {
  if (verb == "train") return lockstep::RunTrainCommand(args);
  if (verb == "predict") return lockstep::RunPredictCommand(args);
  if (verb == "coordinator") return lockstep::RunCoordinatorCommand(args);
  if (verb == "worker") return lockstep::RunWorkerCommand(args);
  if (verb == "submit") return lockstep::RunSubmitCommand(args);
  if (verb == "check") return lockstep::RunCheckCommand(args);
  if (verb == "status") return lockstep::RunStatusCommand(args);
  if (verb == "watch") return lockstep::RunWatchCommand(args);
  if (verb == "list") return lockstep::RunListCommand(args);
  if (verb == "cancel") return lockstep::RunCancelCommand(args);
  if (verb == "pull") return lockstep::RunPullCommand(args);
  if (verb == "health") return lockstep::RunHealthCommand(args);
  if (verb == "audit") return lockstep::RunAuditCommand(args);
  if (verb == "version" || verb == "--version") {
    std::cout << "lockstep " << lockstep::kVersion << std::endl;
    return 0;
  }
  if (verb == "help" || verb == "--help" || verb == "-h") {
    std::cout << kUsage;
    return 0;
  }
  std::cerr << "lockstep: unknown command \"" << verb << "\"\n" << kUsage;
  return 2;
}

}  // namespace
