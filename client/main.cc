// The one lockstep binary: dispatches to a verb (train, ...).
#include <iostream>
#include <string>
#include <vector>

#include "client/train_command.h"
#include "client/version.h"

namespace {

constexpr char kUsage[] =
    "usage: lockstep <command> [args]\n"
    "commands:\n"
    "  train JOB.json [--storage DIR]   train a job in this process\n"
    "  version                          print the version\n"
    "  help                             this text\n"
    "Run `lockstep <command> --help` for a command's flags.\n";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string verb = args[0];
  args.erase(args.begin());
  if (verb == "train") return lockstep::RunTrainCommand(args);
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
