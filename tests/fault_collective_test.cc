// Fault injection at a worker's collective service (DESIGN "Failure and
// rejoin"): raw random bytes on its TCP port and well-framed gRPC calls
// of Push with random payloads, while a job runs. Every message is
// refused, nothing reaches the ring, and the run ends with the bytes of an
// uninterrupted one. The fixture is in fault_fixture.h.
#include "tests/fault_fixture.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>

#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"

namespace lockstep {
namespace {

using fault_fixture::FaultJob;
using fault_fixture::FaultTest;
using testing::RunResult;

TEST_F(FaultTest, GarbageAtTheCollectiveServiceIsRefusedAndNeverSummed) {
  const std::string reference = ReferenceFingerprint();
  Start();
  std::smatch m;
  const std::string log = cluster_->worker(0).Stdout();
  ASSERT_TRUE(std::regex_search(
      log, m, std::regex(R"(collective service (127\.0\.0\.1):(\d+))")))
      << log;
  const std::string address = m[1].str() + ":" + m[2].str();
  const int port = std::stoi(m[2]);
  ASSERT_EQ(Client({"submit", WriteJob(FaultJob())}).exit.exit_code, 0);
  WaitForStep(100);
  std::mt19937 rng(42);
  // Raw random bytes on the TCP port (not even HTTP/2).
  for (int i = 0; i < 5; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    std::string junk(4096, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    EXPECT_GT(write(fd, junk.data(), junk.size()), 0);
    close(fd);
  }
  // Well-framed gRPC calls of Push whose payload is random bytes.
  grpc::GenericStub stub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  for (int i = 0; i < 5; ++i) {
    std::string junk(1000 + i, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    grpc::Slice slice(junk);
    grpc::ByteBuffer request(&slice, 1), response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    std::promise<grpc::Status> done;
    stub.UnaryCall(&context, "/lockstep.v1.Collective/Push",
                   grpc::StubOptions(), &request, &response,
                   [&done](grpc::Status s) { done.set_value(s); });
    const grpc::Status s = done.get_future().get();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << s.error_message();
    // Push is raw: the bytes reach the frame check, which names the length
    // it read and calls them garbage.
    EXPECT_NE(s.error_message().find(
                  "refused a message of " + std::to_string(1000 + i) + " bytes"),
              std::string::npos)
        << s.error_message();
    EXPECT_NE(s.error_message().find("garbage"), std::string::npos)
        << s.error_message();
  }
  EXPECT_TRUE(cluster_->worker(0).WaitForOutput(
      "collective: refused a message of 1004 bytes", 5))
      << cluster_->worker(0).Stdout();
  RunResult w = WatchToEnd();
  EXPECT_EQ(w.exit.exit_code, 0) << w.out << w.err;
  // Nothing reached the ring: no restart, the bytes of the clean run.
  EXPECT_EQ(w.out.find("RECOVERING"), std::string::npos) << w.out;
  EXPECT_EQ(Result()["fingerprint"], reference);
}

}  // namespace
}  // namespace lockstep
