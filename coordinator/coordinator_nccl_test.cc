// The coordinator's checks of what workers offer, without the network: the
// protocol version check, NCCL jobs waiting for GPU workers, rank 0's NCCL
// id relayed to the other ranks once per generation, and "auto" picking
// NCCL only when every rank can run it.
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "coordinator/coordinator.h"
#include "coordinator/coordinator_test_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/rpc_util.h"

namespace lockstep {
namespace {

using testing::CoordinatorTest;
using ::testing::HasSubstr;
using testing::kJob;
namespace v1 = lockstep::v1;

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
  absl::StatusOr<v1::JobStatus> s = c_->submissions().Submit(nccl);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->state(), v1::PENDING);
  EXPECT_EQ(s->message(),
            "waiting for workers: needs 2 with >= 1 GPUs (cluster.collective "
            "\"nccl\") each; 0 idle qualify, 0 busy, 2 offer too few GPUs "
            "that can run NCCL");
}

TEST_F(CoordinatorTest, Rank0sNcclIdReachesTheOtherRanksOncePerGeneration) {
  const std::string a = Register("hosta"), b = Register("hostb");
  ASSERT_TRUE(c_->submissions().Submit(kJob).ok());
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
  absl::StatusOr<std::string> early =
      c_->nccl().FetchNcclId(request(b, 1, "", 0.1));
  ASSERT_TRUE(absl::IsDeadlineExceeded(early.status())) << early.status();
  EXPECT_EQ(early.status().message(),
            "rank 0 of job j generation 1 has not published its NCCL id "
            "within 0 s");
  // Only rank 0 publishes, and only a whole id.
  absl::Status s = c_->nccl().PublishNcclId(request(b, 1, id, 0));
  EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("worker w2 is rank 1"));
  s = c_->nccl().PublishNcclId(request(a, 1, "short", 0));
  EXPECT_EQ(s.message(), "an NCCL unique id is 128 bytes, got 5");
  // A fetch running beside the publish gets it, whichever comes first
  // (nccl_relay_test holds a waiter to be sure it is waiting).
  absl::StatusOr<std::string> fetched;
  std::thread waiter(
      [&] { fetched = c_->nccl().FetchNcclId(request(b, 1, "", 10)); });
  ASSERT_TRUE(c_->nccl().PublishNcclId(request(a, 1, id, 0)).ok());
  waiter.join();
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(*fetched, id);
  EXPECT_TRUE(
      c_->nccl().PublishNcclId(request(a, 1, id, 0)).ok());  // idempotent
  EXPECT_TRUE(absl::IsAlreadyExists(
      c_->nccl().PublishNcclId(request(a, 1, std::string(128, 'x'), 0))));
  // A coordinator that takes over (here a restart from the journal; a
  // standby that leads reads the same journal from etcd) hands out the
  // same id at once: the published id was journaled.
  ASSERT_TRUE(c_->SaveJournal().ok());
  c_ = std::make_unique<Coordinator>(Options());
  ASSERT_TRUE(c_->LoadJournal().ok());
  absl::StatusOr<std::string> again =
      c_->nccl().FetchNcclId(request(b, 1, "", 0));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, id);
  EXPECT_TRUE(absl::IsAlreadyExists(
      c_->nccl().PublishNcclId(request(a, 1, std::string(128, 'x'), 0))));
  // Another worker, or a generation that is over, gets nothing.
  const std::string c = Register("hostc");
  EXPECT_TRUE(absl::IsPermissionDenied(
      c_->nccl().FetchNcclId(request(c, 1, "", 0)).status()));
  absl::StatusOr<std::string> stale =
      c_->nccl().FetchNcclId(request(b, 7, "", 0));
  EXPECT_TRUE(absl::IsFailedPrecondition(stale.status()));
  EXPECT_THAT(stale.status().message(),
              HasSubstr("job j generation 7 is over (the job is RUNNING at "
                        "generation 1)"));
  // The next generation needs a new id.
  ASSERT_TRUE(
      c_->reports()
          .Finish(Failed(b, 1, 1, "link down", absl::StatusCode::kUnavailable))
          .ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(
      c_->nccl().FetchNcclId(request(a, 1, "", 0)).status()));
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
    return c_->registrations().Register(r, "peer")->worker_id();
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
    const std::string z = c_->registrations().Register(r, "peer")->worker_id();
    const std::string y = register_with("gpu9", {"cuda:0"});
    ASSERT_TRUE(c_->submissions().Submit(job).ok());
    EXPECT_EQ(Beat(z).assignment().collective(), "ring");
    ASSERT_TRUE(c_->submissions().Cancel("j").ok());
    Beat(z, "j", 1);
    Beat(y, "j", 1);
    for (const std::string& id : {z, y}) {
      v1::FinishRequest f;
      f.set_worker_id(id);
      f.set_leaving(true);
      ASSERT_TRUE(c_->reports().Finish(f).ok());
    }
  }
  const std::string a = register_with("gpu1", {"cuda:0", "cuda:1"});
  const std::string b = register_with("cpu1", {"cpu:2"});
  // The same name again, run afresh (the same spec alone would return the
  // cancelled job).
  ASSERT_TRUE(c_->submissions().Submit(job, SubmitMode::kRestart).ok());
  EXPECT_EQ(Beat(a).assignment().collective(), "ring");
  EXPECT_EQ(Beat(b).assignment().collective(), "ring");
  EXPECT_THAT(c_->views().Get("j")->events(1),
              HasSubstr("; all-reduce over ring"));
  ASSERT_TRUE(c_->submissions().Cancel("j").ok());
  Beat(a, "j", 1);
  Beat(b, "j", 1);

  // The CPU worker leaves and a second GPU worker comes: NCCL.
  ASSERT_TRUE(c_->reports()
                  .Finish([&] {
                    v1::FinishRequest f;
                    f.set_worker_id(b);
                    f.set_leaving(true);
                    return f;
                  }())
                  .ok());
  const std::string g = register_with("gpu2", {"cuda:0"});
  ASSERT_TRUE(c_->submissions().Submit(job, SubmitMode::kRestart).ok());
  const v1::HeartbeatResponse hb = Beat(g);
  ASSERT_EQ(hb.command(), v1::HeartbeatResponse::RUN);
  EXPECT_EQ(hb.assignment().collective(), "nccl");
  EXPECT_EQ(Beat(a).assignment().collective(), "nccl");
  EXPECT_THAT(c_->views().Get("j")->events(1),
              HasSubstr("; all-reduce over nccl"));
}

}  // namespace
}  // namespace lockstep
