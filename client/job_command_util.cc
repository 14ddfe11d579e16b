// The job verbs' shared flags and client.
#include "client/job_command_util.h"

#include <cstdlib>
#include <iostream>

#include "absl/strings/str_split.h"
#include "client/coordinator_address.h"
#include "client/tls_flags.h"
#include "rpc/tls.h"

namespace lockstep {

int FailVerb(const std::string& verb, const absl::Status& status) {
  std::cerr << "lockstep " << verb << ": error: " << status.message()
            << std::endl;
  return absl::IsInvalidArgument(status) || absl::IsNotFound(status) ||
                 absl::IsAlreadyExists(status)
             ? 2
             : 1;
}

absl::StatusOr<ParsedFlags> ParseJobVerbFlags(
    const std::vector<std::string>& args, std::set<std::string> values,
    std::set<std::string> bools) {
  values.insert({"coordinator", "token-file"});
  bools.insert("help");
  return ParseFlags(args, WithTlsFlags(values), bools);
}

std::unique_ptr<JobClient> JobClientFromFlags(const std::string& verb,
                                              const ParsedFlags& f) {
  absl::StatusOr<TlsFiles> tls = TlsFromFlags(f, TlsRole::kClient);
  absl::StatusOr<std::string> token =
      tls.ok() ? ClientToken(f) : absl::StatusOr<std::string>("");
  for (const absl::Status& s : {tls.status(), token.status()}) {
    if (!s.ok()) {
      std::cerr << "lockstep " << verb << ": " << s.message() << "\n";
      return nullptr;
    }
  }
  // --coordinator, else $LOCKSTEP_COORDINATOR, else the default.
  const char* env = std::getenv("LOCKSTEP_COORDINATOR");
  absl::StatusOr<std::string> parsed = NormalizeCoordinatorAddresses(
      f.Get("coordinator",
            env != nullptr && *env != '\0' ? env : kDefaultCoordinator));
  if (!parsed.ok()) {
    std::cerr << "lockstep " << verb << ": " << parsed.status().message()
              << "\n";
    return nullptr;
  }
  const std::string& address = *parsed;
  for (absl::string_view one : absl::StrSplit(address, ',')) {
    if (!token->empty() && !tls->enabled() &&
        !IsLoopbackAddress(std::string(one))) {
      std::cerr << "lockstep " << verb
                << ": warning: sending the bearer token to " << one
                << " without TLS (pass --tls-ca)\n";
    }
  }
  return std::make_unique<JobClient>(address, *tls, *token);
}

}  // namespace lockstep
