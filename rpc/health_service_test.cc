#include "rpc/health_service.h"

#include <grpcpp/grpcpp.h>

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "rpc/rpc_util.h"

namespace lockstep {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

class HealthServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    // A small bound (the real one is kMaxMessageBytes) for the test of
    // oversized messages.
    ConfigureServer(builder, /*max_message_bytes=*/4096);
    builder.RegisterService(&health_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    stub_ = Health::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                            grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    health_.ShutDown();
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(1));
  }
  grpc::Status Check(const std::string& service, HealthCheckResponse* r) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(5));
    HealthCheckRequest req;
    req.set_service(service);
    return stub_->Check(&context, req, r);
  }
  HealthCheckResponse::ServingStatus StatusOf(const std::string& service) {
    HealthCheckResponse r;
    grpc::Status s = Check(service, &r);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return r.status();
  }

  HealthService health_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Health::Stub> stub_;
};

// A message longer than the server's bound is refused from its length
// prefix, with a status that says so; the server goes on serving.
TEST_F(HealthServiceTest, AMessageOverTheBoundIsRefused) {
  HealthCheckResponse r;
  const grpc::Status s = Check(std::string(5000, 'x'), &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("4096"), std::string::npos)
      << s.error_message();
  EXPECT_EQ(StatusOf("liveness"), HealthCheckResponse::SERVING);
}

TEST_F(HealthServiceTest, NotReadyUntilToldThenServing) {
  EXPECT_EQ(StatusOf(""), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(StatusOf("liveness"), HealthCheckResponse::SERVING);
  health_.SetReady(true);
  EXPECT_EQ(StatusOf(""), HealthCheckResponse::SERVING);
  health_.SetReady(false);
  EXPECT_EQ(StatusOf(""), HealthCheckResponse::NOT_SERVING);
}

TEST_F(HealthServiceTest, ShutDownTurnsBothNamesNotServing) {
  health_.SetReady(true);
  health_.ShutDown();
  EXPECT_EQ(StatusOf(""), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(StatusOf("liveness"), HealthCheckResponse::NOT_SERVING);
  health_.SetReady(true);  // too late: shutting down wins
  EXPECT_EQ(StatusOf(""), HealthCheckResponse::NOT_SERVING);
}

TEST_F(HealthServiceTest, UnknownServiceIsNotFoundNamingTheKnownOnes) {
  HealthCheckResponse r;
  grpc::Status s = Check("lockstep.v1.JobService", &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(),
            "unknown service \"lockstep.v1.JobService\": lockstep serves "
            "\"\" (ready) and \"liveness\"");
}

TEST_F(HealthServiceTest, WatchSendsTheStatusAndEveryChange) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  HealthCheckRequest req;
  auto reader = stub_->Watch(&context, req);
  HealthCheckResponse r;
  ASSERT_TRUE(reader->Read(&r));
  EXPECT_EQ(r.status(), HealthCheckResponse::NOT_SERVING);
  // Each change is made after the previous status arrived, so none can be
  // folded into the next (no sleeps guessing how long a send takes).
  health_.SetReady(true);
  ASSERT_TRUE(reader->Read(&r));
  EXPECT_EQ(r.status(), HealthCheckResponse::SERVING);
  health_.ShutDown();
  ASSERT_TRUE(reader->Read(&r));
  EXPECT_EQ(r.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(reader->Read(&r));  // the stream ends at shutdown
  EXPECT_TRUE(reader->Finish().ok());
}

// A shutdown that comes just after a change was sent must still reach
// every watcher as NOT_SERVING before its stream ends (CI once saw the
// stream close on the stale SERVING). Eight watchers at once put server
// threads at every point of the loop when the shutdown lands.
TEST_F(HealthServiceTest, EveryWatcherSeesTheShutdownStatusBeforeTheEnd) {
  constexpr int kWatchers = 8;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<HealthCheckResponse>>>
      readers;
  HealthCheckRequest req;
  for (int i = 0; i < kWatchers; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    contexts.back()->set_deadline(std::chrono::system_clock::now() +
                                  std::chrono::seconds(10));
    readers.push_back(stub_->Watch(contexts.back().get(), req));
  }
  HealthCheckResponse r;
  for (auto& reader : readers) {
    ASSERT_TRUE(reader->Read(&r));
    EXPECT_EQ(r.status(), HealthCheckResponse::NOT_SERVING);
  }
  health_.SetReady(true);
  for (auto& reader : readers) {
    ASSERT_TRUE(reader->Read(&r));
    EXPECT_EQ(r.status(), HealthCheckResponse::SERVING);
  }
  health_.ShutDown();
  for (int i = 0; i < kWatchers; ++i) {
    ASSERT_TRUE(readers[i]->Read(&r)) << "watcher " << i;
    EXPECT_EQ(r.status(), HealthCheckResponse::NOT_SERVING) << "watcher " << i;
    EXPECT_FALSE(readers[i]->Read(&r)) << "watcher " << i;
    EXPECT_TRUE(readers[i]->Finish().ok()) << "watcher " << i;
  }
}

TEST_F(HealthServiceTest, WatchOfAnUnknownNameSaysServiceUnknown) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  HealthCheckRequest req;
  req.set_service("nope");
  auto reader = stub_->Watch(&context, req);
  HealthCheckResponse r;
  ASSERT_TRUE(reader->Read(&r));
  EXPECT_EQ(r.status(), HealthCheckResponse::SERVICE_UNKNOWN);
  context.TryCancel();
}

}  // namespace
}  // namespace lockstep
