// The security flags shared by every verb that talks gRPC: --tls-cert,
// --tls-key, --tls-ca (daemons and job clients) and the bearer token
// (--token-file, or LOCKSTEP_TOKEN for job clients). Read here, once.
#ifndef LOCKSTEP_CLIENT_TLS_FLAGS_H_
#define LOCKSTEP_CLIENT_TLS_FLAGS_H_

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "client/cli_flags.h"
#include "rpc/tls.h"

namespace lockstep {

// Adds "tls-cert", "tls-key", "tls-ca" to a verb's value flags.
std::set<std::string> WithTlsFlags(std::set<std::string> value_flags);

// Usage lines for the flags above (and the token), per kind of verb.
extern const char kDaemonTlsUsage[];
extern const char kClientSecurityUsage[];

// The verb's TLS files. InvalidArgument naming the missing flag for a
// partial set (a usage error); errors naming the flag and file when one
// cannot be used (rpc/tls.h LoadTlsFiles). No flags: TLS off.
absl::StatusOr<TlsFiles> TlsFromFlags(const ParsedFlags& flags, TlsRole role);

// The token in the file at `path`, trimmed of surrounding whitespace.
// Errors name `flag` and the path: unreadable, or empty once trimmed.
absl::StatusOr<std::string> ReadTokenFile(const std::string& flag,
                                          const std::string& path);

// A job client's bearer token: --token-file, else the LOCKSTEP_TOKEN
// environment variable (trimmed), else "" (send none).
absl::StatusOr<std::string> ClientToken(const ParsedFlags& flags);

}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_TLS_FLAGS_H_
