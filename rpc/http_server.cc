// The daemons' HTTP endpoints (see http_server.h).
#include "rpc/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "rpc/host_port.h"
#include "rpc/listen_check.h"

namespace lockstep {

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const std::string& listen, const std::string& flag,
    std::map<std::string, HttpHandler> routes) {
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", listen, ": expected HOST:PORT (port 0 picks a free one)"));
  }
  const std::string host = HostOf(listen);
  if (absl::Status free = CheckListenAddress(flag, listen); !free.ok()) {
    return free;
  }
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->server_ = std::make_unique<httplib::Server>();
  // The library's default adds SO_REUSEPORT, which lets a second daemon
  // bind the same port and silently share its traffic: refuse that.
  s->server_->set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  for (auto& [path, handler] : routes) {
    s->server_->Get(path,
                    [handler = std::move(handler)](const httplib::Request& req,
                                                   httplib::Response& res) {
                      std::map<std::string, std::string> query(
                          req.params.begin(), req.params.end());
                      HttpReply reply = handler(query);
                      res.status = reply.status;
                      res.set_header("Cache-Control", "no-store");
                      res.set_content(reply.body, reply.content_type.c_str());
                    });
  }
  const bool bound = port == 0 ? (port = s->server_->bind_to_any_port(host)) > 0
                               : s->server_->bind_to_port(host.c_str(), port);
  if (!bound) {
    return absl::UnavailableError(
        absl::StrCat(flag, " ", listen,
                     ": cannot listen there (in use or not a local address?)"));
  }
  s->address_ = absl::StrCat(listen.substr(0, colon), ":", port);
  httplib::Server* server = s->server_.get();
  s->thread_ = std::thread([server] { server->listen_after_bind(); });
  // stop() before the loop runs would be lost (and the join would hang).
  for (int i = 0; i < 500 && !server->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return s;
}

HttpServer::~HttpServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace lockstep
