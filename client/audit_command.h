// `lockstep audit JOB_DIR|FILE`: reads a job's sample audit (audit.jsonl,
// kept when the job sets "audit": {"samples": true}) and prints, per epoch,
// the samples its accepted history saw 0, 1 or more times.
#ifndef LOCKSTEP_CLIENT_AUDIT_COMMAND_H_
#define LOCKSTEP_CLIENT_AUDIT_COMMAND_H_

#include <string>
#include <vector>

namespace lockstep {

// Exit 0 when every sample of every complete epoch was seen exactly once and
// no record contradicts the shard plan, 1 otherwise, 2 for usage errors or
// a file that cannot be read.
int RunAuditCommand(const std::vector<std::string>& args);

}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_AUDIT_COMMAND_H_
