// Probing a listen address before a server binds it (see listen_check.h).
#include "rpc/listen_check.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "rpc/host_port.h"

namespace lockstep {
namespace {

std::string BindError(int err, const std::string& host, int port) {
  switch (err) {
    case EADDRINUSE:
      return absl::StrCat("port ", port,
                          " is in use by another process (ss -ltnp 'sport = :",
                          port, "' names it; port 0 picks a free one)");
    case EADDRNOTAVAIL:
      return absl::StrCat("\"", host,
                          "\" is not an address of this machine (0.0.0.0 "
                          "listens on all of them)");
    case EACCES:
      return absl::StrCat("port ", port,
                          " is privileged (below the system's "
                          "ip_unprivileged_port_start): take a higher one");
    default:
      return absl::StrCat("cannot bind (", strerror(err), ")");
  }
}

}  // namespace

absl::Status CheckListenAddress(const std::string& flag,
                                const std::string& listen) {
  const size_t colon = listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::OkStatus();
  }
  // gRPC's own forms (unix:PATH, unix-abstract:NAME, vsock:CID:PORT,
  // ipv4:/ipv6:) are its to bind.
  for (const char* scheme :
       {"unix:", "unix-abstract:", "vsock:", "ipv4:", "ipv6:", "dns:"}) {
    if (absl::StartsWith(listen, scheme)) return absl::OkStatus();
  }
  const std::string host = HostOf(listen);
  const std::string where = absl::StrCat(flag, " ", listen, ": ");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(),
                             service.c_str(), &hints, &found);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat(where, "cannot resolve \"", host,
                                               "\" (", gai_strerror(rc), ")"));
  }
  // As gRPC: the server starts when any of the addresses binds, so the
  // first failure is reported only when none does.
  absl::Status status;
  bool bound = false;
  for (addrinfo* a = found; a != nullptr && !bound; a = a->ai_next) {
    const int fd =
        socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;  // a family this machine lacks: the server's say
    const int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    const int err = bind(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    close(fd);
    if (err == 0) {
      bound = true;
    } else if (status.ok()) {
      status = absl::UnavailableError(
          absl::StrCat(where, BindError(err, host, port)));
    }
  }
  if (bound) status = absl::OkStatus();
  freeaddrinfo(found);
  return status;
}

}  // namespace lockstep
