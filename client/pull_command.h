// `lockstep pull JOB DEST [--step N]`: a job's files fetched over the job
// service (no shared storage needed).
#ifndef LOCKSTEP_CLIENT_PULL_COMMAND_H_
#define LOCKSTEP_CLIENT_PULL_COMMAND_H_

#include <string>
#include <vector>

namespace lockstep {

// The exit code: 0 pulled; 2 usage, an unknown job or step; 1 otherwise
// (unreachable coordinator, refused credentials, a transfer that failed
// every attempt, an unwritable DEST).
int RunPullCommand(const std::vector<std::string>& args);

}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_PULL_COMMAND_H_
