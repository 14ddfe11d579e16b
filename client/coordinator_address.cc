// Coordinator address parsing (see the header).
#include "client/coordinator_address.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace lockstep {

absl::StatusOr<std::string> NormalizeCoordinatorAddress(
    const std::string& address) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("coordinator address \"", address, "\": ", why));
  };
  std::string text(absl::StripAsciiWhitespace(address));
  if (const size_t at = text.find("://"); at != std::string::npos) {
    const std::string scheme = absl::AsciiStrToLower(text.substr(0, at));
    if (scheme == "https" || scheme == "grpcs") {
      return bad("give host:port, and --tls-ca for TLS, not a scheme");
    }
    if (scheme != "http" && scheme != "grpc") {
      return bad(absl::StrCat("unknown scheme \"", text.substr(0, at),
                              "\"; give host:port"));
    }
    text = text.substr(at + 3);
    while (!text.empty() && text.back() == '/') text.pop_back();
  }
  if (text.find('/') != std::string::npos) {
    return bad("give host:port, without a path");
  }
  absl::StatusOr<HostPort> parsed = ParseHostPort(
      text, absl::StrCat("coordinator address \"", address, "\""), 1);
  if (!parsed.ok()) return parsed.status();
  return parsed->With(kDefaultCoordinatorPort);
}

std::string HostPort::With(int default_port) const {
  return absl::StrCat(host, ":", port.value_or(default_port));
}

absl::StatusOr<HostPort> ParseHostPort(const std::string& address,
                                       const std::string& what, int min_port) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", why));
  };
  const std::string text(absl::StripAsciiWhitespace(address));
  if (text.empty()) return bad("empty; give host:port");
  HostPort out;
  std::string port;
  bool has_port = false;
  if (text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos) return bad("an unclosed [");
    out.host = text.substr(0, close + 1);
    const std::string rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return bad("give host:port");
      port = rest.substr(1);
      has_port = true;
    }
  } else if (std::count(text.begin(), text.end(), ':') > 1) {
    out.host = absl::StrCat("[", text, "]");  // a bare IPv6 address
  } else if (const size_t colon = text.find(':'); colon != std::string::npos) {
    out.host = text.substr(0, colon);
    port = text.substr(colon + 1);
    has_port = true;
  } else {
    out.host = text;
  }
  if (has_port) {
    int value = 0;
    if (!absl::SimpleAtoi(port, &value) || value < min_port || value > 65535 ||
        port.find_first_not_of("0123456789") != std::string::npos) {
      return bad(absl::StrCat("give host:port with a port from ", min_port,
                              " to 65535"));
    }
    out.port = value;
  }
  if (out.host.empty() || out.host == "[]")
    return bad("no host; give host:port");
  return out;
}

absl::StatusOr<std::string> NormalizeCoordinatorAddresses(
    const std::string& list) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    absl::StatusOr<std::string> one =
        NormalizeCoordinatorAddress(std::string(part));
    if (!one.ok()) return one.status();
    out.push_back(*one);
  }
  return absl::StrJoin(out, ",");
}

}  // namespace lockstep
