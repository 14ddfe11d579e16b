// BootstrapNcclId against a real coordinator on loopback gRPC, no GPU: both
// ranks end with rank 0's bytes, a lone rank 1 times out naming rank 0, a
// stale generation is refused, both ranks ride out a coordinator restart,
// and with several coordinators they fail over to the one that answers.
#include "worker/nccl_bootstrap.h"

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/file_util.h"
#include "coordinator/auth.h"
#include "coordinator/coordinator.h"
#include "coordinator/coordinator_test_util.h"
#include "coordinator/services.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/coordinator_stubs.h"
#include "rpc/rpc_util.h"
#include "rpc/tls.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
namespace v1 = lockstep::v1;

constexpr const char* kJob = testing::kTwoWorkerJob;

// BootstrapNcclId on one coordinator's stub, polls of up to 300 s.
absl::StatusOr<std::string> OnStub(
    v1::Coordinator::StubInterface* coordinator, const std::string& worker_id,
    const std::string& job, int64_t generation, int rank,
    std::function<absl::StatusOr<std::string>()> make_id,
    absl::Duration timeout,
    std::function<void(const absl::Status&)> on_unavailable = nullptr) {
  return BootstrapNcclId(
      [coordinator](const CoordinatorCall& call) { return call(coordinator); },
      worker_id, job, generation, rank, std::move(make_id), timeout,
      absl::Seconds(300), std::move(on_unavailable));
}

std::string KnownId() {
  std::string id(128, '\0');
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>(i * 7 + 1);
  return id;
}

class NcclBootstrapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorOptions o;
    o.storage_dir = JoinPath(
        ::testing::TempDir(),
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    coordinator_ = std::make_unique<Coordinator>(o);
    ASSERT_TRUE(coordinator_->LoadJournal().ok());
    service_ = std::make_unique<ClusterServiceImpl>(coordinator_.get(), &auth_);
    StartServer(0);
    stub_ = v1::Coordinator::NewStub(
        MakeChannel("127.0.0.1:" + std::to_string(port_), TlsFiles()));
    worker0_ = Register("hosta");
    worker1_ = Register("hostb");
    absl::StatusOr<v1::JobStatus> job =
        coordinator_->submissions().Submit(kJob);
    ASSERT_TRUE(job.ok()) << job.status();
    ASSERT_EQ(job->state(), v1::RUNNING);
    ASSERT_EQ(job->generation(), 1);
  }
  void TearDown() override { StopServer(); }

  void StartServer(int port) {
    grpc::ServerBuilder b;
    ConfigureServer(b);
    b.AddListeningPort("127.0.0.1:" + std::to_string(port),
                       grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
  }
  void StopServer() {
    if (server_ == nullptr) return;
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(1));
    server_.reset();
  }
  std::string Register(const std::string& host) {
    absl::StatusOr<v1::RegisterResponse> resp =
        coordinator_->registrations().Register(testing::TestRegistration(host),
                                               "peer");
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() ? resp->worker_id() : "";
  }
  // Rank 0's make_id: the known bytes, counting its calls.
  std::function<absl::StatusOr<std::string>()> MakeKnownId() {
    return [this]() -> absl::StatusOr<std::string> {
      ++made_;
      return KnownId();
    };
  }
  // Other ranks must never make an id.
  static absl::StatusOr<std::string> NeverCalled() {
    ADD_FAILURE() << "make_id called on a rank other than 0";
    return absl::InternalError("make_id called on a rank other than 0");
  }
  absl::StatusOr<std::string> Bootstrap(int rank, absl::Duration timeout,
                                        int64_t generation = 1) {
    return OnStub(stub_.get(), rank == 0 ? worker0_ : worker1_, "j", generation,
                  rank, rank == 0 ? MakeKnownId() : NeverCalled, timeout,
                  [this, rank](const absl::Status&) { ++unavailable_[rank]; });
  }
  // Blocks until `done()` holds (bounded: 20 s); false if it never did.
  template <typename Done>
  static bool Until(Done done) {
    const absl::Time give_up = absl::Now() + absl::Seconds(20);
    while (!done() && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(2));
    }
    return done();
  }

  Authorizer auth_{AuthOptions{}};
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<ClusterServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  std::string worker0_, worker1_;
  std::atomic<int> made_{0};
  std::atomic<int> unavailable_[2] = {0, 0};  // UNAVAILABLE answers per rank
};

TEST_F(NcclBootstrapTest, BothRanksGetRank0sBytes) {
  absl::StatusOr<std::string> fetched;
  std::thread rank1([&] { fetched = Bootstrap(1, absl::Seconds(20)); });
  ASSERT_TRUE(Until([&] { return coordinator_->nccl().Waiting("j") == 1; }))
      << "rank 1 never waited";
  absl::StatusOr<std::string> published = Bootstrap(0, absl::Seconds(20));
  rank1.join();
  ASSERT_TRUE(published.ok()) << published.status();
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(*published, KnownId());
  EXPECT_EQ(*fetched, KnownId());
  EXPECT_EQ(made_.load(), 1);
  // A rank that comes later gets the same bytes at once.
  absl::StatusOr<std::string> late = Bootstrap(1, absl::Seconds(1));
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(*late, KnownId());
}

TEST_F(NcclBootstrapTest, Rank1AloneTimesOutNamingRank0) {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> id = Bootstrap(1, absl::Milliseconds(500));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  ASSERT_EQ(id.status().code(), absl::StatusCode::kDeadlineExceeded)
      << id.status();
  EXPECT_THAT(std::string(id.status().message()),
              StartsWith("while fetching the NCCL id of job j generation 1 "
                         "from the coordinator (as rank 1): rank 0 did not "
                         "publish it within 500ms"));
  EXPECT_THAT(std::string(id.status().message()),
              HasSubstr("rank 0 of job j generation 1 has not published its "
                        "NCCL id"));
}

TEST_F(NcclBootstrapTest, AStaleGenerationIsRefused) {
  absl::StatusOr<std::string> fetched = Bootstrap(1, absl::Seconds(5), 7);
  ASSERT_EQ(fetched.status().code(), absl::StatusCode::kFailedPrecondition)
      << fetched.status();
  EXPECT_THAT(std::string(fetched.status().message()),
              StartsWith("while fetching the NCCL id of job j generation 7 "
                         "from the coordinator (as rank 1): FetchNcclId: job "
                         "j generation 7 is over (the job is RUNNING at "
                         "generation 1)"));
  absl::StatusOr<std::string> published = Bootstrap(0, absl::Seconds(5), 7);
  ASSERT_EQ(published.status().code(), absl::StatusCode::kFailedPrecondition)
      << published.status();
  EXPECT_THAT(std::string(published.status().message()),
              StartsWith("while publishing the NCCL id of job j generation 7 "
                         "to the coordinator (as rank 0): PublishNcclId: job "
                         "j generation 7 is over"));
}

TEST_F(NcclBootstrapTest, ErrorsFromMakeIdAndBadIdsAreNotRetried) {
  absl::StatusOr<std::string> id = OnStub(
      stub_.get(), worker0_, "j", 1, 0,
      [] {
        return absl::StatusOr<std::string>(absl::UnavailableError("no NIC"));
      },
      absl::Seconds(5));
  EXPECT_EQ(id.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(id.status().message(),
            "while publishing the NCCL id of job j generation 1 to the "
            "coordinator (as rank 0): no NIC");
  const absl::Time start = absl::Now();
  id = OnStub(
      stub_.get(), worker0_, "j", 1, 0,
      [] { return absl::StatusOr<std::string>("short"); }, absl::Seconds(5));
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(id.status().message()),
              HasSubstr("an NCCL unique id is 128 bytes, got 5"));
}

// The coordinator goes away and comes back on the same port (a restart):
// both ranks retry UNAVAILABLE and finish once it answers.
TEST_F(NcclBootstrapTest, BothRanksRideOutACoordinatorRestart) {
  const int port = port_;
  StopServer();
  absl::StatusOr<std::string> ids[2];
  std::thread rank1([&] { ids[1] = Bootstrap(1, absl::Seconds(30)); });
  std::thread rank0([&] { ids[0] = Bootstrap(0, absl::Seconds(30)); });
  ASSERT_TRUE(Until([&] {
    return unavailable_[0] >= 1 && unavailable_[1] >= 1;
  })) << "ranks found the coordinator down "
      << unavailable_[0] << " and " << unavailable_[1] << " times";
  StartServer(port);
  rank0.join();
  rank1.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(ids[r].ok()) << "rank " << r << ": " << ids[r].status();
    EXPECT_EQ(*ids[r], KnownId());
  }
}

// Several coordinators, the first unreachable (a killed leader; a standby
// answers UNAVAILABLE too): through CoordinatorStubs' Run both ranks go on
// to the one that answers and end with rank 0's bytes.
TEST_F(NcclBootstrapTest, BothRanksFailOverToTheCoordinatorThatAnswers) {
  CoordinatorStubs stubs({"127.0.0.1:1", "127.0.0.1:" + std::to_string(port_)},
                         TlsFiles());
  const CoordinatorRunner run = [&stubs](const CoordinatorCall& call) {
    return stubs.Run(call);
  };
  absl::StatusOr<std::string> ids[2];
  std::thread rank1([&] {
    ids[1] = BootstrapNcclId(
        run, worker1_, "j", 1, 1, NeverCalled, absl::Seconds(20),
        absl::Seconds(1), [this](const absl::Status&) { ++unavailable_[1]; });
  });
  ids[0] = BootstrapNcclId(run, worker0_, "j", 1, 0, MakeKnownId(),
                           absl::Seconds(20), absl::Seconds(1),
                           [this](const absl::Status&) { ++unavailable_[0]; });
  rank1.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(ids[r].ok()) << "rank " << r << ": " << ids[r].status();
    EXPECT_EQ(*ids[r], KnownId());
  }
  // The first call went to the unreachable one.
  EXPECT_GE(unavailable_[0] + unavailable_[1], 1);
  EXPECT_EQ(made_.load(), 1);
}

// The coordinator's own "not published yet" (a poll's end) is no reason to
// fail over: with the live coordinator first, a lone rank 1 polls it
// until its deadline and never tries the unreachable second one.
TEST_F(NcclBootstrapTest, ANotYetAnswerKeepsTheCoordinator) {
  CoordinatorStubs stubs({"127.0.0.1:" + std::to_string(port_), "127.0.0.1:1"},
                         TlsFiles());
  absl::StatusOr<std::string> id = BootstrapNcclId(
      [&stubs](const CoordinatorCall& call) { return stubs.Run(call); },
      worker1_, "j", 1, 1, NeverCalled, absl::Milliseconds(1500),
      absl::Milliseconds(300),
      [this](const absl::Status&) { ++unavailable_[1]; });
  ASSERT_EQ(id.status().code(), absl::StatusCode::kDeadlineExceeded)
      << id.status();
  EXPECT_THAT(std::string(id.status().message()),
              HasSubstr("has not published its NCCL id"));
  EXPECT_EQ(unavailable_[1].load(), 0);
  EXPECT_EQ(stubs.address(), "127.0.0.1:" + std::to_string(port_));
}

TEST_F(NcclBootstrapTest, AnUnreachableCoordinatorEndsAtTheDeadline) {
  StopServer();
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> id = Bootstrap(0, absl::Milliseconds(1500));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  ASSERT_EQ(id.status().code(), absl::StatusCode::kDeadlineExceeded)
      << id.status();
  EXPECT_THAT(std::string(id.status().message()),
              StartsWith("while publishing the NCCL id of job j generation 1 "
                         "to the coordinator (as rank 0): the coordinator "
                         "stayed unreachable for 1.5s"));
}

}  // namespace
}  // namespace lockstep
