// What every job client verb shares: its flags (--coordinator and the
// security flags), the client they make, and how an error ends the verb.
#ifndef LOCKSTEP_CLIENT_JOB_COMMAND_UTIL_H_
#define LOCKSTEP_CLIENT_JOB_COMMAND_UTIL_H_

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/cli_flags.h"
#include "client/job_client.h"

namespace lockstep {

inline constexpr char kDefaultCoordinator[] = "127.0.0.1:7070";
// In every job verb's synopsis.
inline constexpr char kSecurityFlags[] =
    "[--tls-ca F [--tls-cert F --tls-key F]] [--token-file F]";

// Prints "lockstep VERB: error: ..." and returns the exit code: 2 for a bad
// request (InvalidArgument, NotFound, AlreadyExists), else 1.
int FailVerb(const std::string& verb, const absl::Status& status);

// The verb's flags plus --coordinator, --token-file, the TLS flags and
// --help.
absl::StatusOr<ParsedFlags> ParseJobVerbFlags(
    const std::vector<std::string>& args, std::set<std::string> values,
    std::set<std::string> bools);

// The client for --coordinator (default: $LOCKSTEP_COORDINATOR, else
// kDefaultCoordinator) and the security flags, or nullptr after
// printing what is wrong with them (the verb then exits 2).
std::unique_ptr<JobClient> JobClientFromFlags(const std::string& verb,
                                              const ParsedFlags& f);

}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_JOB_COMMAND_UTIL_H_
