#include "rpc/http_server.h"

#include <httplib.h>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(HttpServerTest, ServesRoutesWithQueryAnd404Otherwise) {
  absl::StatusOr<std::unique_ptr<HttpServer>> s = HttpServer::Start(
      "127.0.0.1:0", "--http",
      {{"/metrics", [](const std::map<std::string, std::string>& q) {
          HttpReply r;
          r.body = "x " + (q.count("n") ? q.at("n") : std::string("none"));
          return r;
        }}});
  ASSERT_TRUE(s.ok()) << s.status();
  const std::string address = (*s)->address();
  ASSERT_EQ(address.rfind("127.0.0.1:", 0), 0u) << address;
  httplib::Client client("127.0.0.1",
                         std::stoi(address.substr(address.rfind(':') + 1)));
  auto res = client.Get("/metrics?n=7");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "x 7");
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; charset=utf-8");
  auto missing = client.Get("/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

TEST(HttpServerTest, AnAddressInUseIsRefusedNamingTheFlag) {
  absl::StatusOr<std::unique_ptr<HttpServer>> a =
      HttpServer::Start("127.0.0.1:0", "--http", {});
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<std::unique_ptr<HttpServer>> b =
      HttpServer::Start((*a)->address(), "--http", {});
  const std::string port =
      (*a)->address().substr((*a)->address().rfind(':') + 1);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(b.status().message(),
            "--http " + (*a)->address() + ": port " + port +
                " is in use by another process (ss -ltnp 'sport = :" + port +
                "' names it; port 0 picks a free one)");
}

TEST(HttpServerTest, MalformedAddressesAreInvalid) {
  for (const char* bad : {"nohost", "127.0.0.1:x", "127.0.0.1:70000"}) {
    absl::StatusOr<std::unique_ptr<HttpServer>> s =
        HttpServer::Start(bad, "--http", {});
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().message(),
              std::string("--http ") + bad +
                  ": expected HOST:PORT (port 0 picks a free one)");
  }
}

}  // namespace
}  // namespace lockstep
