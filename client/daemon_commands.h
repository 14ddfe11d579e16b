// The long-running verbs: `lockstep coordinator` and `lockstep worker`.
#ifndef LOCKSTEP_CLIENT_DAEMON_COMMANDS_H_
#define LOCKSTEP_CLIENT_DAEMON_COMMANDS_H_

#include <string>
#include <vector>

namespace lockstep {

// Exit codes: 0 after SIGINT/SIGTERM, 2 bad flags, 1 a fatal error (cannot
// listen, registration refused).
int RunCoordinatorCommand(const std::vector<std::string>& args);
int RunWorkerCommand(const std::vector<std::string>& args);

}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_DAEMON_COMMANDS_H_
