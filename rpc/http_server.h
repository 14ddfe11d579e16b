// A small HTTP server for the daemons' operational endpoints (/metrics, the
// coordinator's dashboard), on Debian's cpp-httplib. GET only; handlers run
// on the library's thread pool and must be thread-safe.
#ifndef LOCKSTEP_RPC_HTTP_SERVER_H_
#define LOCKSTEP_RPC_HTTP_SERVER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace lockstep {

struct HttpReply {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// Query parameters of the request.
using HttpHandler =
    std::function<HttpReply(const std::map<std::string, std::string>& query)>;

class HttpServer {
 public:
  // Binds `listen` ("host:port", port 0 picks a free one) and serves the
  // exact paths in `routes` on a background thread; other paths get 404.
  // Unavailable naming `flag` when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      const std::string& listen, const std::string& flag,
      std::map<std::string, HttpHandler> routes);
  ~HttpServer();  // stops serving and joins the thread

  // "host:port" with the bound port.
  const std::string& address() const { return address_; }

 private:
  HttpServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string address_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_RPC_HTTP_SERVER_H_
