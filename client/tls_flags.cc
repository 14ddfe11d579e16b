// Security flags: TLS files and bearer token.
#include "client/tls_flags.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"

namespace lockstep {

const char kDaemonTlsUsage[] =
    "  --tls-cert F   this daemon's certificate (PEM); with --tls-key and "
    "--tls-ca turns TLS on (all three or none)\n"
    "  --tls-key F    the certificate's private key (PEM, no passphrase)\n"
    "  --tls-ca F     the CA (PEM) that signed the coordinator's and every "
    "worker's certificate\n";

const char kClientSecurityUsage[] =
    "  --coordinator HOST:PORT  the coordinator, or several comma-separated "
    "(in standby behind etcd: the one leading answers) (default: "
    "$LOCKSTEP_COORDINATOR, else 127.0.0.1:7070)\n"
    "  --tls-ca F      talk TLS to the coordinator, trusting this CA (PEM)\n"
    "  --tls-cert F    with --tls-key F: a client certificate to present "
    "(optional)\n"
    "  --token-file F  the coordinator's bearer token (default: "
    "$LOCKSTEP_TOKEN)\n";

std::set<std::string> WithTlsFlags(std::set<std::string> value_flags) {
  value_flags.insert({"tls-cert", "tls-key", "tls-ca"});
  return value_flags;
}

absl::StatusOr<TlsFiles> TlsFromFlags(const ParsedFlags& flags, TlsRole role) {
  TlsPaths paths;
  paths.cert = flags.Get("tls-cert", "");
  paths.key = flags.Get("tls-key", "");
  paths.ca = flags.Get("tls-ca", "");
  return LoadTlsFiles(paths, role);
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& flag,
                                          const std::string& path) {
  absl::StatusOr<std::string> content = ReadFile(path);
  if (!content.ok()) {
    return absl::Status(content.status().code(),
                        absl::StrCat(flag, ": ", content.status().message()));
  }
  std::string token(absl::StripAsciiWhitespace(*content));
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " \"", path, "\": the file holds no token"));
  }
  return token;
}

absl::StatusOr<std::string> ClientToken(const ParsedFlags& flags) {
  if (flags.Has("token-file")) {
    return ReadTokenFile("--token-file", flags.Get("token-file", ""));
  }
  const char* env = std::getenv("LOCKSTEP_TOKEN");
  return std::string(absl::StripAsciiWhitespace(env == nullptr ? "" : env));
}

}  // namespace lockstep
