// The job client verbs: submit, status, watch, list, cancel.
#ifndef LOCKSTEP_CLIENT_JOB_COMMANDS_H_
#define LOCKSTEP_CLIENT_JOB_COMMANDS_H_

#include <string>
#include <vector>

namespace lockstep {

// Each returns the process exit code: 0 ok; 2 usage, a bad job or an
// unknown job (NOT_FOUND); 1 anything else (coordinator unreachable, a job
// that FAILED or was CANCELLED under --wait / watch).
int RunSubmitCommand(const std::vector<std::string>& args);
// Validates a job file (or stdin) and prints the JSON submit would send.
int RunCheckCommand(const std::vector<std::string>& args);
int RunStatusCommand(const std::vector<std::string>& args);
int RunWatchCommand(const std::vector<std::string>& args);
int RunListCommand(const std::vector<std::string>& args);
int RunCancelCommand(const std::vector<std::string>& args);

}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_JOB_COMMANDS_H_
