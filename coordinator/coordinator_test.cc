// The coordinator's state machine without the network: gang start and rank
// order, assignments through heartbeats, STOP after a cancel, fingerprint
// mismatches and lost workers failing the job with the ranks named, the
// protocol version check, and a job that succeeds writing result.json.
#include "coordinator/coordinator.h"

#include <string>

#include "core/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/rpc_util.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
namespace v1 = lockstep::v1;

constexpr char kJob[] = R"({
  "name": "j", "seed": 1,
  "model": {"input_shape": [4], "layers": [{"type": "dense", "units": 2}]},
  "data": {"format": "synthetic", "train_samples": 100, "test_samples": 10,
           "num_classes": 2},
  "batch_size_per_replica": 10, "epochs": 1,
  "cluster": {"workers": 2, "replicas_per_worker": 1}
})";

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorOptions o;
    o.storage_dir = JoinPath(
        ::testing::TempDir(),
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    o.worker_timeout_seconds = 0.3;
    c_ = std::make_unique<Coordinator>(o);
  }
  std::string Register(const std::string& host, int replicas = 1,
                       int version = kProtocolVersion) {
    v1::RegisterRequest r;
    r.set_protocol_version(version);
    r.set_host(host);
    r.set_pid(100);
    r.set_collective_address(host + ":1");
    r.set_replicas(replicas);
    absl::StatusOr<v1::RegisterResponse> resp = c_->Register(r, "peer");
    return resp.ok() ? resp->worker_id() : std::string(resp.status().message());
  }
  v1::HeartbeatResponse Beat(const std::string& id, const std::string& job = "",
                             int64_t generation = 0) {
    v1::HeartbeatRequest r;
    r.set_worker_id(id);
    r.set_job(job);
    r.set_generation(generation);
    absl::StatusOr<v1::HeartbeatResponse> resp = c_->Heartbeat(r);
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() ? *resp : v1::HeartbeatResponse();
  }
  void Fingerprint(int rank, int64_t step, const std::string& fp) {
    v1::ProgressReport r;
    r.set_job("j");
    r.set_generation(1);
    r.set_rank(rank);
    r.set_step(step);
    r.set_fingerprint_step(step);
    r.set_fingerprint(fp);
    ASSERT_TRUE(c_->ReportProgress(r).ok());
  }
  std::unique_ptr<Coordinator> c_;
};

TEST_F(CoordinatorTest, PendingUntilTwoWorkersThenRanksInRegistrationOrder) {
  const std::string a = Register("hosta");
  absl::StatusOr<v1::JobStatus> s = c_->Submit(kJob);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->state(), v1::PENDING);
  EXPECT_THAT(s->message(),
              HasSubstr("needs 2 with >= 1 replicas each; 1 idle qualify"));
  EXPECT_EQ(Beat(a).command(), v1::HeartbeatResponse::NONE);
  const std::string b = Register("hostb");
  EXPECT_EQ(c_->Get("j")->state(), v1::RUNNING);
  EXPECT_EQ(c_->Get("j")->generation(), 1);
  v1::HeartbeatResponse hb = Beat(b);
  ASSERT_EQ(hb.command(), v1::HeartbeatResponse::RUN);
  EXPECT_EQ(hb.assignment().rank(), 1);
  EXPECT_EQ(hb.assignment().world_size(), 2);
  EXPECT_EQ(hb.assignment().peers(0), "hosta:1");
  EXPECT_EQ(hb.assignment().peers(1), "hostb:1");
  EXPECT_EQ(Beat(a).assignment().rank(), 0);
  // A duplicate submit while running is refused.
  EXPECT_TRUE(absl::IsAlreadyExists(c_->Submit(kJob).status()));
}

TEST_F(CoordinatorTest, CancelSendsStopAndFreesTheWorkers) {
  const std::string a = Register("hosta"), b = Register("hostb");
  ASSERT_TRUE(c_->Submit(kJob).ok());
  ASSERT_EQ(Beat(a).command(), v1::HeartbeatResponse::RUN);
  absl::StatusOr<v1::JobStatus> s = c_->Cancel("j");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->state(), v1::CANCELLED);
  v1::HeartbeatResponse hb = Beat(a, "j", 1);
  EXPECT_EQ(hb.command(), v1::HeartbeatResponse::STOP);
  EXPECT_THAT(hb.reason(), HasSubstr("cancelled at step 0"));
  Beat(a);  // idle again
  v1::ListJobsResponse l = c_->List();
  ASSERT_EQ(l.workers_size(), 2);
  EXPECT_EQ(l.workers(0).job(), "");
  EXPECT_TRUE(absl::IsNotFound(c_->Cancel("nope").status()));
}

TEST_F(CoordinatorTest, FingerprintMismatchFailsNamingTheRanks) {
  Register("hosta");
  Register("hostb");
  ASSERT_TRUE(c_->Submit(kJob).ok());
  Fingerprint(0, 5, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
  Fingerprint(1, 5, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
  EXPECT_EQ(c_->Get("j")->state(), v1::RUNNING);
  Fingerprint(0, 10, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
  Fingerprint(1, 10, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
  absl::StatusOr<v1::JobStatus> s = c_->Get("j");
  EXPECT_EQ(s->state(), v1::FAILED);
  EXPECT_THAT(s->message(),
              HasSubstr("parameters diverged across workers at step 10 "
                        "(fingerprints rank 0 aaaaaaaaaaaaaaaa, rank 1 "
                        "bbbbbbbbbbbbbbbb)"));
}

TEST_F(CoordinatorTest, LostWorkerFailsTheJobNamingRankAndHost) {
  const std::string a = Register("hosta");
  Register("hostb");
  ASSERT_TRUE(c_->Submit(kJob).ok());
  absl::SleepFor(absl::Milliseconds(200));
  Beat(a, "j", 1);
  absl::SleepFor(absl::Milliseconds(200));
  c_->Tick();  // hostb silent for 0.4 s > 0.3 s
  absl::StatusOr<v1::JobStatus> s = c_->Get("j");
  EXPECT_EQ(s->state(), v1::FAILED);
  EXPECT_THAT(s->message(),
              HasSubstr("rank 1 (w2 on hostb pid 100, hostb:1) lost"));
  v1::HeartbeatRequest r;
  r.set_worker_id("w2");
  EXPECT_TRUE(absl::IsNotFound(c_->Heartbeat(r).status()));
}

TEST_F(CoordinatorTest, ProtocolVersionAndNcclAreRefused) {
  EXPECT_THAT(Register("old", 1, 99),
              HasSubstr("protocol version 99 is not this coordinator's (1)"));
  std::string nccl = kJob;
  nccl.replace(nccl.find("\"replicas_per_worker\": 1"), 24,
               "\"replicas_per_worker\": 1, \"collective\": \"nccl\"");
  absl::StatusOr<v1::JobStatus> s = c_->Submit(nccl);
  EXPECT_TRUE(absl::IsInvalidArgument(s.status()));
  EXPECT_THAT(s.status().message(), HasSubstr("cluster.collective: \"nccl\""));
  EXPECT_TRUE(absl::IsNotFound(c_->Get("j").status()));
}

TEST_F(CoordinatorTest, AllRanksFinishingWithOneFingerprintSucceeds) {
  Register("hosta");
  Register("hostb");
  ASSERT_TRUE(c_->Submit(kJob).ok());
  for (int rank : {0, 1}) {
    v1::FinishRequest f;
    f.set_job("j");
    f.set_generation(1);
    f.set_rank(rank);
    f.set_steps(5);
    f.set_epochs(1);
    f.set_fingerprint("cccccccccccccccccccccccccccccccc");
    f.set_test_accuracy(0.75);
    ASSERT_TRUE(c_->Finish(f).ok());
  }
  absl::StatusOr<v1::JobStatus> s = c_->Get("j");
  EXPECT_EQ(s->state(), v1::SUCCEEDED) << s->message();
  EXPECT_EQ(s->test_accuracy(), 0.75);
  EXPECT_THAT(s->result_path(), HasSubstr("/jobs/j/result.json"));
}

}  // namespace
}  // namespace lockstep
