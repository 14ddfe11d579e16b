#include "rpc/listen_check.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"
#include "rpc/host_port.h"

namespace lockstep {
namespace {

// A socket listening on 127.0.0.1 at a free port; its port.
int ListenOnFreePort(int* fd) {
  *fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(*fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return -1;
  if (listen(*fd, 1) != 0) return -1;
  socklen_t n = sizeof(a);
  getsockname(*fd, reinterpret_cast<sockaddr*>(&a), &n);
  return ntohs(a.sin_port);
}

TEST(ListenCheckTest, APortInUseIsNamedWithTheFlag) {
  int fd = -1;
  const int port = ListenOnFreePort(&fd);
  ASSERT_GT(port, 0);
  const std::string listen = "127.0.0.1:" + std::to_string(port);
  absl::Status s = CheckListenAddress("--listen", listen);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(),
            "--listen " + listen + ": port " + std::to_string(port) +
                " is in use by another process (ss -ltnp 'sport = :" +
                std::to_string(port) + "' names it; port 0 picks a free one)");
  close(fd);
  // Closed (no connection, so no TIME_WAIT to wait out): free again.
  EXPECT_TRUE(CheckListenAddress("--listen", listen).ok());
}

TEST(ListenCheckTest, AnAddressThisMachineLacksIsNamed) {
  // TEST-NET-1 (RFC 5737): bound here only, nothing is sent.
  absl::Status s = CheckListenAddress("--http", "192.0.2.1:8080");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(),
            "--http 192.0.2.1:8080: \"192.0.2.1\" is not an address of this "
            "machine (0.0.0.0 listens on all of them)");
  // Port 0 (any free port) is no help there.
  EXPECT_EQ(CheckListenAddress("--listen", "192.0.2.1:0").message(),
            "--listen 192.0.2.1:0: \"192.0.2.1\" is not an address of this "
            "machine (0.0.0.0 listens on all of them)");
}

TEST(ListenCheckTest, PortZeroAndTextsThatAreNotHostPortAreTheServersSay) {
  for (const char* listen :
       {"127.0.0.1:0", "nohost", "127.0.0.1:x", "127.0.0.1:70000",
        "vsock:3:5000", "unix:/tmp/no/such/dir/s:1"}) {
    EXPECT_TRUE(CheckListenAddress("--listen", listen).ok()) << listen;
  }
}

TEST(HostOfTest, TheHostWithoutBracketsOrPort) {
  EXPECT_EQ(HostOf("127.0.0.1:7070"), "127.0.0.1");
  EXPECT_EQ(HostOf("[::1]:7070"), "::1");
  EXPECT_EQ(HostOf("[::1]"), "::1");
  EXPECT_EQ(HostOf("localhost"), "localhost");
  EXPECT_EQ(HostOf(":7070"), "");
}

}  // namespace
}  // namespace lockstep
