// The coordinator's state machine without the network: gang start and rank
// order, assignments through heartbeats, STOP after a cancel, fingerprint
// mismatches and lost workers failing the job with the ranks named, the
// protocol version check, and a job that succeeds writing result.json.
#include "coordinator/coordinator.h"

#include <string>
#include <thread>

#include "absl/strings/str_format.h"
#include "base/file_util.h"
#include "coordinator/coordinator_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/rpc_util.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
namespace v1 = lockstep::v1;

constexpr const char* kJob = testing::kTwoWorkerJob;

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
    v1::RegisterRequest r = testing::TestRegistration(host, replicas);
    r.set_protocol_version(version);
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
  // A rank's report that its part of `generation` failed with `code`.
  static v1::FinishRequest Failed(const std::string& worker, int64_t generation,
                                  int rank, const std::string& error,
                                  absl::StatusCode code) {
    v1::FinishRequest f;
    f.set_worker_id(worker);
    f.set_job("j");
    f.set_generation(generation);
    f.set_rank(rank);
    f.set_error(error);
    f.set_error_code(static_cast<int>(code));
    return f;
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

// kJob with a restart policy: {"max_restarts": M, "backoff_seconds": 0,
// "replacement_timeout_seconds": T}.
std::string JobWithRestarts(int max_restarts, double replacement_timeout = 60) {
  std::string job = kJob;
  job.replace(job.rfind('}'), 1,
              absl::StrFormat(", \"restart\": {\"max_restarts\": %d, "
                              "\"backoff_seconds\": 0, "
                              "\"replacement_timeout_seconds\": %g}}",
                              max_restarts, replacement_timeout));
  return job;
}

TEST_F(CoordinatorTest, LostWorkerRecoversAtTheNextGenerationWithANewWorker) {
  const std::string a = Register("hosta");
  Register("hostb");
  ASSERT_TRUE(c_->Submit(JobWithRestarts(2)).ok());
  absl::SleepFor(absl::Milliseconds(200));
  Beat(a, "j", 1);
  absl::SleepFor(absl::Milliseconds(200));
  c_->Tick();  // hostb silent for 0.4 s > 0.3 s
  absl::StatusOr<v1::JobStatus> s = c_->Get("j");
  EXPECT_EQ(s->state(), v1::RECOVERING);
  EXPECT_THAT(s->message(),
              HasSubstr("rank 1 (w2 on hostb pid 100, hostb:1) lost: no "
                        "heartbeat for"));
  EXPECT_THAT(s->message(), HasSubstr("needs 2 with >= 1 replicas each; 1 "
                                      "idle qualify"));
  v1::HeartbeatRequest r;
  r.set_worker_id("w2");
  EXPECT_TRUE(absl::IsNotFound(c_->Heartbeat(r).status()));
  // The survivor is told to stop generation 1.
  EXPECT_EQ(Beat(a, "j", 1).command(), v1::HeartbeatResponse::STOP);
  // A replacement registers: generation 2 starts at once (no back-off).
  const std::string c = Register("hostc");
  s = c_->Get("j");
  EXPECT_EQ(s->state(), v1::RUNNING);
  EXPECT_EQ(s->generation(), 2);
  EXPECT_EQ(s->restarts(), 1);
  v1::HeartbeatResponse hb = Beat(a);
  ASSERT_EQ(hb.command(), v1::HeartbeatResponse::RUN);
  EXPECT_EQ(hb.assignment().generation(), 2);
  EXPECT_EQ(hb.assignment().rank(), 0);
  EXPECT_EQ(hb.assignment().peers(1), "hostc:1");
  EXPECT_EQ(Beat(c).assignment().rank(), 1);
  EXPECT_THAT(s->events(s->events_size() - 1),
              HasSubstr("RUNNING generation 2 from step 0 (restart 1 of 2"));
}

TEST_F(CoordinatorTest, BrokenStreamBlamesTheNeighbourAtOnce) {
  const std::string a = Register("hosta");
  const std::string b = Register("hostb");
  ASSERT_TRUE(c_->Submit(JobWithRestarts(1)).ok());
  v1::FinishRequest f =
      Failed(a, 1, 0, "the stream from rank 1 (hostb:1) broke",
             absl::StatusCode::kUnavailable);
  f.add_suspect_ranks(1);
  ASSERT_TRUE(c_->Finish(f).ok());
  absl::StatusOr<v1::JobStatus> s = c_->Get("j");
  EXPECT_EQ(s->state(), v1::RECOVERING);
  EXPECT_THAT(s->message(),
              HasSubstr("rank 1 (w2 on hostb pid 100, hostb:1) lost: rank 0 "
                        "reports: the stream from rank 1 (hostb:1) broke"));
  v1::HeartbeatRequest r;
  r.set_worker_id(b);
  EXPECT_TRUE(absl::IsNotFound(c_->Heartbeat(r).status()));
  // It was alive after all: it registers again and the job goes on.
  Register("hostb");
  EXPECT_EQ(c_->Get("j")->state(), v1::RUNNING);
  EXPECT_EQ(c_->Get("j")->generation(), 2);
  // A second loss exceeds max_restarts = 1: FAILED naming rank and host.
  f.set_generation(2);
  ASSERT_TRUE(c_->Finish(f).ok());
  s = c_->Get("j");
  EXPECT_EQ(s->state(), v1::FAILED);
  EXPECT_THAT(s->message(), HasSubstr("rank 1 (w3 on hostb pid 100, hostb:1) "
                                      "lost"));
  EXPECT_THAT(s->message(),
              HasSubstr("no restart left (restart.max_restarts = 1)"));
}

TEST_F(CoordinatorTest, TheJobsOwnErrorFailsWithoutRestart) {
  const std::string a = Register("hosta");
  Register("hostb");
  ASSERT_TRUE(c_->Submit(JobWithRestarts(3)).ok());
  v1::FinishRequest f = Failed(a, 1, 0, "data.train_images: no such file",
                               absl::StatusCode::kNotFound);
  ASSERT_TRUE(c_->Finish(f).ok());
  absl::StatusOr<v1::JobStatus> s = c_->Get("j");
  EXPECT_EQ(s->state(), v1::FAILED);
  EXPECT_THAT(s->message(), HasSubstr("rank 0 (w1 on hosta pid 100) failed: "
                                      "data.train_images: no such file"));
}

TEST_F(CoordinatorTest, NoReplacementInTimeFailsNamingTheLostRank) {
  Register("hosta");
  const std::string b = Register("hostb");
  ASSERT_TRUE(c_->Submit(JobWithRestarts(3, 0.2)).ok());
  v1::FinishRequest f = Failed(b, 1, 1, "the worker is shutting down",
                               absl::StatusCode::kCancelled);
  ASSERT_TRUE(c_->Finish(f).ok());
  EXPECT_EQ(c_->Get("j")->state(), v1::RECOVERING);
  absl::SleepFor(absl::Milliseconds(250));
  c_->Tick();
  absl::StatusOr<v1::JobStatus> s = c_->Get("j");
  EXPECT_EQ(s->state(), v1::FAILED);
  EXPECT_THAT(s->message(),
              HasSubstr("rank 1 (w2 on hostb pid 100) failed: the worker is "
                        "shutting down; no replacement worker joined within"));
}

TEST_F(CoordinatorTest, AWorkerLeavingOnSigtermIsNotCountedAsAFailure) {
  const std::string a = Register("hosta");
  std::string b = Register("hostb");
  ASSERT_TRUE(c_->Submit(JobWithRestarts(5)).ok());
  // The same pod name leaves twice (two rolling restarts): never excluded.
  for (int generation = 1; generation <= 2; ++generation) {
    v1::FinishRequest f =
        Failed(b, generation, 1,
               "stopped by the coordinator (the worker is shutting down)",
               absl::StatusCode::kCancelled);
    f.set_leaving(true);
    ASSERT_TRUE(c_->Finish(f).ok());
    absl::StatusOr<v1::JobStatus> s = c_->Get("j");
    ASSERT_EQ(s->state(), v1::RECOVERING);
    EXPECT_THAT(s->message(), HasSubstr("rank 1 (w"));
    EXPECT_THAT(s->message(), HasSubstr("left: the worker is shutting down"));
    v1::HeartbeatRequest r;
    r.set_worker_id(b);
    EXPECT_TRUE(absl::IsNotFound(c_->Heartbeat(r).status()));
    b = Register("hostb");  // the restarted pod
    ASSERT_EQ(c_->Get("j")->state(), v1::RUNNING);
  }
  EXPECT_EQ(c_->Get("j")->generation(), 3);
  EXPECT_EQ(Beat(a).assignment().peers(1), "hostb:1");
}

TEST_F(CoordinatorTest, ANameThatKeepsFailingIsNotHandedTheJobAgain) {
  const std::string a = Register("hosta");
  std::string b = Register("hostb");
  ASSERT_TRUE(c_->Submit(JobWithRestarts(5)).ok());
  for (int generation = 1; generation <= 2; ++generation) {
    v1::FinishRequest f = Failed(b, generation, 1, "out of memory",
                                 absl::StatusCode::kResourceExhausted);
    ASSERT_TRUE(c_->Finish(f).ok());
    ASSERT_EQ(c_->Get("j")->state(), v1::RECOVERING);
    c_->Tick();
  }
  // hostb failed it twice: both are idle but it is not used again.
  absl::StatusOr<v1::JobStatus> s = c_->Get("j");
  EXPECT_EQ(s->state(), v1::RECOVERING);
  EXPECT_THAT(s->message(), HasSubstr("1 excluded after failing this job 2 "
                                      "times"));
  Register("hostc");
  EXPECT_EQ(c_->Get("j")->state(), v1::RUNNING);
  EXPECT_EQ(Beat(a).assignment().peers(1), "hostc:1");
}

TEST_F(CoordinatorTest, ARestartedProcessUnderTheSameNameReplacesTheOld) {
  const std::string a = Register("hosta");
  const std::string b = Register("hostb");
  ASSERT_TRUE(c_->Submit(JobWithRestarts(3)).ok());
  v1::RegisterRequest r;
  r.set_protocol_version(kProtocolVersion);
  r.set_host("hostb");
  r.set_pid(200);  // a new process, same collective address (= name)
  r.set_collective_address("hostb:1");
  r.set_replicas(1);
  absl::StatusOr<v1::RegisterResponse> reg = c_->Register(r, "peer");
  ASSERT_TRUE(reg.ok()) << reg.status();
  absl::StatusOr<v1::JobStatus> s = c_->Get("j");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->state(), v1::RUNNING);  // generation 2 with the new process
  EXPECT_EQ(s->generation(), 2);
  EXPECT_THAT(s->events(), ::testing::Contains(HasSubstr(
                               "replaced by a new registration of \"hostb:1\" "
                               "(pid 200)")));
  v1::HeartbeatRequest hb;
  hb.set_worker_id(b);
  absl::Status old = c_->Heartbeat(hb).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(old)) << old;
  EXPECT_THAT(old.message(), HasSubstr("was replaced by w3"));
  int members = 0;
  const v1::ListJobsResponse list = c_->List();
  for (const auto& w : list.workers()) members += w.alive();
  EXPECT_EQ(members, 2);
}

TEST_F(CoordinatorTest, AStalledRingNamesTheRankStepAndBucketThenDropsIt) {
  CoordinatorOptions o;
  o.storage_dir = JoinPath(::testing::TempDir(), "stalled");
  o.hang_report_seconds = 0.5;
  o.hang_timeout_seconds = 2;
  c_ = std::make_unique<Coordinator>(o);
  const std::string a = Register("hosta");
  const std::string b = Register("hostb");
  ASSERT_TRUE(c_->Submit(JobWithRestarts(3)).ok());
  v1::HeartbeatRequest r;
  r.set_worker_id(a);
  r.set_job("j");
  r.set_generation(1);
  r.mutable_wait()->set_from_rank(1);
  r.mutable_wait()->set_step(130);
  r.mutable_wait()->set_bucket(2);
  r.mutable_wait()->set_seconds(1.5);
  ASSERT_TRUE(c_->Heartbeat(r).ok());
  Beat(b, "j", 1);  // alive, but its ring waits on it
  c_->Tick();
  absl::StatusOr<v1::JobStatus> s = c_->Get("j");
  EXPECT_EQ(s->state(), v1::RUNNING);
  EXPECT_THAT(s->message(),
              HasSubstr("the ring is stalled: rank 0 has waited 1.5 s for "
                        "rank 1 at step 130 (gradient bucket 2)"));
  EXPECT_THAT(s->workers(0).waiting(), HasSubstr("for rank 1 at step 130"));
  r.mutable_wait()->set_seconds(2.5);
  ASSERT_TRUE(c_->Heartbeat(r).ok());
  Beat(b, "j", 1);
  c_->Tick();
  s = c_->Get("j");
  EXPECT_EQ(s->state(), v1::RECOVERING);
  EXPECT_THAT(s->message(),
              HasSubstr("rank 1 (w2 on hostb pid 100, hostb:1) lost: hung: "
                        "rank 0 has waited 2.5 s for rank 1 at step 130 "
                        "(gradient bucket 2)"));
}

TEST_F(CoordinatorTest, ARestartedCoordinatorResumesFromTheJournal) {
  const std::string a = Register("hosta");
  const std::string b = Register("hostb");
  ASSERT_TRUE(c_->Submit(kJob).ok());
  CoordinatorOptions o;
  o.storage_dir = JoinPath(::testing::TempDir(),
                           "ARestartedCoordinatorResumesFromTheJournal");
  o.worker_timeout_seconds = 0.3;
  c_ = std::make_unique<Coordinator>(o);  // the old one "died"
  ASSERT_TRUE(c_->LoadJournal().ok());
  absl::StatusOr<v1::JobStatus> s = c_->Get("j");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->state(), v1::RUNNING);
  EXPECT_EQ(s->generation(), 1);
  // Its workers go on heartbeating under their ids, nothing is stopped.
  EXPECT_EQ(Beat(a, "j", 1).command(), v1::HeartbeatResponse::NONE);
  EXPECT_EQ(Beat(b, "j", 1).command(), v1::HeartbeatResponse::NONE);
  EXPECT_TRUE(absl::IsAlreadyExists(c_->Submit(kJob).status()));
  // A new worker gets the next id, not a reused one.
  EXPECT_EQ(Register("hostc"), "w3");
  // A damaged journal is refused, naming the file.
  const std::string path = c_->JournalPath();
  std::string bytes = *ReadFile(path);
  bytes[bytes.size() / 2] ^= 1;
  ASSERT_TRUE(WriteFileAtomic(path, bytes).ok());
  Coordinator fresh(o);
  absl::Status load = fresh.LoadJournal();
  EXPECT_TRUE(absl::IsDataLoss(load)) << load;
  EXPECT_THAT(load.message(), HasSubstr(path + " is damaged (CRC mismatch)"));
}

TEST_F(CoordinatorTest, ProtocolVersionIsRefusedAndNcclWaitsForGpus) {
  EXPECT_THAT(Register("old", 1, 99),
              HasSubstr(absl::StrFormat(
                  "protocol version 99 is not this coordinator's (%d)",
                  kProtocolVersion)));
  // CPU workers cannot run an NCCL job: it waits, saying for what.
  Register("hosta");
  Register("hostb");
  std::string nccl = kJob;
  nccl.replace(nccl.find("\"replicas_per_worker\": 1"), 24,
               "\"replicas_per_worker\": 1, \"collective\": \"nccl\"");
  absl::StatusOr<v1::JobStatus> s = c_->Submit(nccl);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->state(), v1::PENDING);
  EXPECT_EQ(s->message(),
            "waiting for workers: needs 2 with >= 1 GPUs (cluster.collective "
            "\"nccl\") each; 0 idle qualify, 0 busy, 2 offer too few GPUs "
            "that can run NCCL");
}

TEST_F(CoordinatorTest, Rank0sNcclIdReachesTheOtherRanksOncePerGeneration) {
  const std::string a = Register("hosta"), b = Register("hostb");
  ASSERT_TRUE(c_->Submit(kJob).ok());
  auto request = [](const std::string& worker, int64_t generation,
                    const std::string& id, double wait) {
    v1::NcclIdRequest r;
    r.set_worker_id(worker);
    r.set_job("j");
    r.set_generation(generation);
    r.set_unique_id(id);
    r.set_wait_seconds(wait);
    return r;
  };
  const std::string id(128, '\x07');
  // Before rank 0 publishes, a fetch waits, then says who it waited for.
  absl::StatusOr<std::string> early = c_->FetchNcclId(request(b, 1, "", 0.1));
  ASSERT_TRUE(absl::IsDeadlineExceeded(early.status())) << early.status();
  EXPECT_EQ(early.status().message(),
            "rank 0 of job j generation 1 has not published its NCCL id "
            "within 0 s");
  // Only rank 0 publishes, and only a whole id.
  absl::Status s = c_->PublishNcclId(request(b, 1, id, 0));
  EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("worker w2 is rank 1"));
  s = c_->PublishNcclId(request(a, 1, "short", 0));
  EXPECT_EQ(s.message(), "an NCCL unique id is 128 bytes, got 5");
  // A fetch already waiting gets it as soon as it is published.
  absl::StatusOr<std::string> fetched;
  std::thread waiter([&] { fetched = c_->FetchNcclId(request(b, 1, "", 10)); });
  absl::SleepFor(absl::Milliseconds(50));
  ASSERT_TRUE(c_->PublishNcclId(request(a, 1, id, 0)).ok());
  waiter.join();
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(*fetched, id);
  EXPECT_TRUE(c_->PublishNcclId(request(a, 1, id, 0)).ok());  // idempotent
  EXPECT_TRUE(absl::IsAlreadyExists(
      c_->PublishNcclId(request(a, 1, std::string(128, 'x'), 0))));
  // Another worker, or a generation that is over, gets nothing.
  const std::string c = Register("hostc");
  EXPECT_TRUE(
      absl::IsPermissionDenied(c_->FetchNcclId(request(c, 1, "", 0)).status()));
  absl::StatusOr<std::string> stale = c_->FetchNcclId(request(b, 7, "", 0));
  EXPECT_TRUE(absl::IsFailedPrecondition(stale.status()));
  EXPECT_THAT(stale.status().message(),
              HasSubstr("job j generation 7 is over (the job is RUNNING at "
                        "generation 1)"));
  // The next generation needs a new id.
  ASSERT_TRUE(
      c_->Finish(Failed(b, 1, 1, "link down", absl::StatusCode::kUnavailable))
          .ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(
      c_->FetchNcclId(request(a, 1, "", 0)).status()));
}

TEST_F(CoordinatorTest, AutoPicksNcclOnlyWhenEveryRankHasTheGpus) {
  auto register_with = [&](const std::string& host,
                           std::vector<std::string> devices) {
    v1::RegisterRequest r;
    r.set_protocol_version(kProtocolVersion);
    r.set_host(host);
    r.set_pid(1);
    r.set_collective_address(host + ":1");
    r.set_replicas(static_cast<int>(devices.size()));
    for (const std::string& d : devices) r.add_devices(d);
    r.add_collectives("ring");
    if (devices[0].rfind("cuda:", 0) == 0) r.add_collectives("nccl");
    return c_->Register(r, "peer")->worker_id();
  };
  std::string job = kJob;
  job.replace(job.find("\"replicas_per_worker\": 1"), 24,
              "\"replicas_per_worker\": 1, \"collective\": \"auto\"");
  // A GPU worker that cannot run NCCL (a build without it) is not counted
  // as one.
  {
    v1::RegisterRequest r;
    r.set_protocol_version(kProtocolVersion);
    r.set_host("gpu0");
    r.set_collective_address("gpu0:1");
    r.set_replicas(1);
    r.add_devices("cuda:0");
    r.add_collectives("ring");
    const std::string z = c_->Register(r, "peer")->worker_id();
    const std::string y = register_with("gpu9", {"cuda:0"});
    ASSERT_TRUE(c_->Submit(job).ok());
    EXPECT_EQ(Beat(z).assignment().collective(), "ring");
    ASSERT_TRUE(c_->Cancel("j").ok());
    Beat(z, "j", 1);
    Beat(y, "j", 1);
    for (const std::string& id : {z, y}) {
      v1::FinishRequest f;
      f.set_worker_id(id);
      f.set_leaving(true);
      ASSERT_TRUE(c_->Finish(f).ok());
    }
  }
  const std::string a = register_with("gpu1", {"cuda:0", "cuda:1"});
  const std::string b = register_with("cpu1", {"cpu:2"});
  ASSERT_TRUE(c_->Submit(job).ok());
  EXPECT_EQ(Beat(a).assignment().collective(), "ring");
  EXPECT_EQ(Beat(b).assignment().collective(), "ring");
  EXPECT_THAT(c_->Get("j")->events(1), HasSubstr("; all-reduce over ring"));
  ASSERT_TRUE(c_->Cancel("j").ok());
  Beat(a, "j", 1);
  Beat(b, "j", 1);

  // The CPU worker leaves and a second GPU worker comes: NCCL.
  ASSERT_TRUE(c_->Finish([&] {
                  v1::FinishRequest f;
                  f.set_worker_id(b);
                  f.set_leaving(true);
                  return f;
                }())
                  .ok());
  const std::string g = register_with("gpu2", {"cuda:0"});
  ASSERT_TRUE(c_->Submit(job).ok());
  const v1::HeartbeatResponse hb = Beat(g);
  ASSERT_EQ(hb.command(), v1::HeartbeatResponse::RUN);
  EXPECT_EQ(hb.assignment().collective(), "nccl");
  EXPECT_EQ(Beat(a).assignment().collective(), "nccl");
  EXPECT_THAT(c_->Get("j")->events(1), HasSubstr("; all-reduce over nccl"));
}

TEST_F(CoordinatorTest, AnIdleWorkerLeavingIsNeverHandedAJob) {
  const std::string a = Register("hosta");
  const std::string b = Register("hostb");
  v1::FinishRequest leave;
  leave.set_worker_id(b);
  leave.set_leaving(true);
  leave.set_error("the worker is shutting down");
  std::string over;
  ASSERT_TRUE(c_->Finish(leave, &over).ok());
  EXPECT_EQ(over, "");  // it had no job
  absl::StatusOr<v1::JobStatus> s = c_->Submit(kJob);
  ASSERT_TRUE(s.ok());
  // Only one member is left: the job waits instead of starting on a worker
  // that is gone.
  EXPECT_EQ(s->state(), v1::PENDING);
  EXPECT_THAT(s->message(), HasSubstr("1 idle qualify"));
  const std::string c = Register("hostc");
  EXPECT_EQ(c_->Get("j")->state(), v1::RUNNING);
  EXPECT_EQ(Beat(c).assignment().rank(), 1);
  EXPECT_EQ(Beat(a).assignment().rank(), 0);
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
