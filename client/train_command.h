// `lockstep train JOB.json [--storage DIR] ...`: the local trainer verb.
#ifndef LOCKSTEP_CLIENT_TRAIN_COMMAND_H_
#define LOCKSTEP_CLIENT_TRAIN_COMMAND_H_

#include <string>
#include <vector>

namespace lockstep {

extern const char kTrainUsage[];

// Runs the verb; returns the process exit status (0 done, 1 failed,
// 2 bad usage or bad job, 128+signal when stopped by SIGINT/SIGTERM after
// a checkpoint).
int RunTrainCommand(const std::vector<std::string>& args);

}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_TRAIN_COMMAND_H_
