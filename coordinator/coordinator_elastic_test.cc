// Elastic jobs in the coordinator's state machine (no network): a start
// with cluster.workers.min after the start grace, growth at a step
// boundary when a worker registers (the ranks regroup from their memory),
// a shrink to the survivors after the rejoin grace, and the membership
// history every generation adds to.
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "coordinator/coordinator.h"
#include "coordinator/coordinator_test_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using testing::CoordinatorTest;
using ::testing::HasSubstr;
namespace v1 = lockstep::v1;

// kTwoWorkerJob as {"min": 2, "max": 3} workers, graces of 0.5 s, no
// back-off.
constexpr char kElasticJob[] = R"({
  "name": "j", "seed": 1,
  "model": {"input_shape": [4], "layers": [{"type": "dense", "units": 2}]},
  "data": {"format": "synthetic", "train_samples": 100, "test_samples": 10,
           "num_classes": 2},
  "batch_size_per_replica": 10, "epochs": 1,
  "cluster": {"workers": {"min": 2, "max": 3}, "replicas_per_worker": 1,
              "start_grace_seconds": 0.5, "rejoin_grace_seconds": 0.5},
  "restart": {"backoff_seconds": 0}
})";

class ElasticTest : public CoordinatorTest {
 protected:
  // Heartbeats from every worker named (so none times out), then a Tick.
  void BeatAndTick(std::initializer_list<std::string> ids) {
    for (const std::string& id : ids) Beat(id);
    c_->Tick();
  }
  // Passes a grace of 0.5 s in steps shorter than the 0.3 s worker
  // timeout, beating for the idle workers named.
  void PassGrace(std::initializer_list<std::string> ids) {
    for (int i = 0; i < 3; ++i) {
      Pass(0.2);
      for (const std::string& id : ids) Beat(id);
    }
  }
  static v1::FinishRequest Regrouped(const std::string& worker, int rank,
                                     int64_t step) {
    v1::FinishRequest f;
    f.set_worker_id(worker);
    f.set_job("j");
    f.set_generation(1);
    f.set_rank(rank);
    f.set_regroup(true);
    f.set_steps(step);
    f.set_error("generation 1 ended after step 5: workers join the job");
    f.set_error_code(static_cast<int>(absl::StatusCode::kCancelled));
    f.set_held_step(step);
    f.set_held_fingerprint(absl::StrFormat("fp%d", step));
    return f;
  }
  v1::JobStatus Job() {
    absl::StatusOr<v1::JobStatus> s = c_->views().Get("j");
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : v1::JobStatus();
  }
  std::string LastEvents(int n) {
    const v1::JobStatus s = Job();
    std::string out;
    for (int i = std::max(0, s.events_size() - n); i < s.events_size(); ++i) {
      out += s.events(i) + "\n";
    }
    return out;
  }
};

TEST_F(ElasticTest, StartsWithMinAfterTheGraceAndGrowsAtAStepBoundary) {
  const std::string a = Register("hosta"), b = Register("hostb");
  ASSERT_TRUE(c_->submissions().Submit(kElasticJob).ok());
  EXPECT_EQ(Job().state(), v1::PENDING);
  EXPECT_THAT(Job().message(), HasSubstr("needs 2 (up to 3, within 0.5 s)"));
  EXPECT_THAT(Job().events(0),
              HasSubstr("submitted: 2-3 workers x 1 replicas, batch 10 per "
                        "replica; elastic: global batch 30 whatever the "
                        "world"));
  PassGrace({a, b});
  BeatAndTick({a, b});
  ASSERT_EQ(Job().state(), v1::RUNNING);
  EXPECT_EQ(Job().generation(), 1);
  EXPECT_THAT(LastEvents(1),
              HasSubstr("membership: 2 workers (of 2-3) from step 0"));
  EXPECT_EQ(Beat(a).assignment().world_size(), 2);
  EXPECT_FALSE(Beat(a, "j", 1).regroup());

  // A third worker registers: the generation is asked to end at the next
  // step boundary.
  const std::string c = Register("hostc");
  BeatAndTick({c});
  EXPECT_THAT(LastEvents(1),
              HasSubstr("1 idle worker can join: generation 1 ends at the "
                        "next step boundary to grow from 2 to 3 workers"));
  EXPECT_TRUE(Beat(a, "j", 1).regroup());
  EXPECT_TRUE(Beat(b, "j", 1).regroup());
  // The ranks agreed on step 5 and keep its state.
  ASSERT_TRUE(c_->reports().Finish(Regrouped(a, 0, 5)).ok());
  EXPECT_EQ(Job().state(), v1::RECOVERING);
  BeatAndTick({a, b, c});
  // A planned grow, not a failure, and what it waits for, counted down.
  EXPECT_EQ(Job().recovery(), "grow");
  EXPECT_EQ(Job().message(), "1 idle worker joins, from 2 to 3 workers");
  EXPECT_EQ(Job().waiting_for(),
            "1 surviving rank to report what it kept in memory");
  EXPECT_GT(Job().waiting_seconds_left(), 0);
  EXPECT_LE(Job().waiting_seconds_left(), kSurvivorReportSeconds);
  EXPECT_THAT(LastEvents(1),
              HasSubstr("growing: generation 1 ended after step 5: 1 idle "
                        "worker joins, from 2 to 3 workers (no restart "
                        "counted; nothing is done again)"));
  ASSERT_TRUE(c_->reports().Finish(Regrouped(b, 1, 5)).ok());
  const v1::JobStatus s = Job();
  ASSERT_EQ(s.state(), v1::RUNNING);
  EXPECT_EQ(s.generation(), 2);
  EXPECT_EQ(s.restarts(), 0);  // not a failure
  EXPECT_THAT(LastEvents(3),
              HasSubstr("RUNNING generation 2 from step 5 (rank 0's memory; "
                        "the latest checkpoint is step 0) (the world grows, "));
  EXPECT_THAT(LastEvents(3),
              HasSubstr(" s later, no restart counted; no step is done "
                        "again): rank 0 = w1"));
  EXPECT_THAT(LastEvents(1),
              HasSubstr("membership: 2 -> 3 workers (of 2-3) from step 5: "
                        "1 idle worker joins, from 2 to 3 workers"));
  const v1::HeartbeatResponse hc = Beat(c);
  ASSERT_EQ(hc.command(), v1::HeartbeatResponse::RUN);
  EXPECT_EQ(hc.assignment().world_size(), 3);
  EXPECT_EQ(hc.assignment().rank(), 2);
  EXPECT_EQ(hc.assignment().memory_step(), 5);
  EXPECT_EQ(hc.assignment().memory_fingerprint(), "fp5");
  ASSERT_EQ(s.membership_size(), 2);
  EXPECT_EQ(s.membership(0).from_step(), 0);
  EXPECT_EQ(s.membership(0).workers(), 2);
  EXPECT_EQ(s.membership(0).why(), "start");
  EXPECT_EQ(s.membership(1).generation(), 2);
  EXPECT_EQ(s.membership(1).from_step(), 5);
  EXPECT_EQ(s.membership(1).workers(), 3);
  EXPECT_EQ(s.membership(1).replicas(), 3);
  // At its max it asks for no more.
  BeatAndTick({a, b, c, Register("hostd")});
  EXPECT_FALSE(Beat(a, "j", 2).regroup());
}

TEST_F(ElasticTest, ALostWorkerLeavesTheSurvivorsAfterTheRejoinGrace) {
  const std::string a = Register("hosta"), b = Register("hostb"),
                    c = Register("hostc");
  ASSERT_TRUE(c_->submissions().Submit(kElasticJob).ok());
  ASSERT_EQ(Job().state(), v1::RUNNING);  // its max: no grace
  EXPECT_EQ(Beat(a).assignment().world_size(), 3);
  // Rank 0's stream from rank 2 broke: rank 2 is lost; the survivors keep
  // step 7.
  v1::FinishRequest f = Failed(a, 1, 0, "stream from rank 2 broke",
                               absl::StatusCode::kUnavailable);
  f.add_suspect_ranks(2);
  f.set_held_step(7);
  f.set_held_fingerprint("fp7");
  ASSERT_TRUE(c_->reports().Finish(f).ok());
  v1::FinishRequest g = Failed(b, 1, 1, "aborted", absl::StatusCode::kAborted);
  g.set_held_step(7);
  g.set_held_fingerprint("fp7");
  ASSERT_TRUE(c_->reports().Finish(g).ok());
  // Rank 2 is silent: blamed once its heartbeats stop (0.3 s here).
  for (int i = 0; i < 2; ++i) {
    Pass(0.2);
    BeatAndTick({a, b});
  }
  EXPECT_EQ(Job().state(), v1::RECOVERING);  // the rejoin grace runs
  EXPECT_EQ(Job().recovery(), "failure");
  EXPECT_THAT(Job().message(), HasSubstr("needs 2 (up to 3, within 0.5 s)"));
  EXPECT_EQ(Job().waiting_for(),
            "a replacement worker: the rejoin grace, then 2 go on");
  EXPECT_LE(Job().waiting_seconds_left(), 0.5);
  PassGrace({a, b});
  BeatAndTick({a, b});
  const v1::JobStatus s = Job();
  ASSERT_EQ(s.state(), v1::RUNNING);
  EXPECT_EQ(s.generation(), 2);
  // The elastic contract, not a restart: no restart is counted.
  EXPECT_EQ(s.restarts(), 0);
  EXPECT_THAT(LastEvents(3), HasSubstr("(the world shrinks from 3 to 2 "
                                       "workers "));
  EXPECT_EQ(s.waiting_for(), "");
  EXPECT_GT(s.membership(1).started_unix_seconds(),
            s.membership(0).started_unix_seconds());
  EXPECT_THAT(LastEvents(1),
              HasSubstr("membership: 3 -> 2 workers (of 2-3) from step 7: "
                        "rank 2 (w3 on hostc pid 100, hostc:1) lost"));
  ASSERT_EQ(s.membership_size(), 2);
  EXPECT_EQ(s.membership(1).workers(), 2);
  EXPECT_EQ(s.membership(1).from_step(), 7);
  const v1::HeartbeatResponse hb = Beat(b);
  EXPECT_EQ(hb.assignment().world_size(), 2);
  EXPECT_EQ(hb.assignment().memory_step(), 7);
}

TEST_F(ElasticTest, AReplacementWithinTheGraceKeepsTheWorld) {
  const std::string a = Register("hosta"), b = Register("hostb"),
                    c = Register("hostc");
  ASSERT_TRUE(c_->submissions().Submit(kElasticJob).ok());
  v1::FinishRequest f = Failed(a, 1, 0, "stream from rank 2 broke",
                               absl::StatusCode::kUnavailable);
  f.add_suspect_ranks(2);
  ASSERT_TRUE(c_->reports().Finish(f).ok());
  ASSERT_TRUE(
      c_->reports()
          .Finish(Failed(b, 1, 1, "aborted", absl::StatusCode::kAborted))
          .ok());
  for (int i = 0; i < 2; ++i) {  // rank 2 silent: lost after 0.3 s
    Pass(0.2);
    BeatAndTick({a, b});
  }
  ASSERT_EQ(Job().state(), v1::RECOVERING);
  Register("hostd");  // within the grace: 3 again at once
  EXPECT_EQ(Job().state(), v1::RUNNING);
  EXPECT_EQ(Beat(a).assignment().world_size(), 3);
}

// With three ranks, a rank whose upstream died aborts its own streams, so
// its downstream suspects it: the blame follows the chain of suspects to
// the rank that reported none.
TEST_F(ElasticTest, ThreeRanksFollowTheChainOfSuspects) {
  const std::string a = Register("hosta"), b = Register("hostb"),
                    c = Register("hostc");
  ASSERT_TRUE(c_->submissions().Submit(kElasticJob).ok());
  v1::FinishRequest from1 = Failed(b, 1, 1, "the stream from rank 0 broke",
                                   absl::StatusCode::kUnavailable);
  from1.add_suspect_ranks(0);
  ASSERT_TRUE(c_->reports().Finish(from1).ok());
  EXPECT_EQ(Job().state(), v1::RUNNING);  // rank 0 may name its own suspect
  v1::FinishRequest from0 = Failed(a, 1, 0, "the stream from rank 2 broke",
                                   absl::StatusCode::kUnavailable);
  from0.add_suspect_ranks(2);
  ASSERT_TRUE(c_->reports().Finish(from0).ok());
  for (int i = 0; i < 6; ++i) {  // rank 2 stays silent for over 1 s
    Pass(0.2);
    Beat(a);
    Beat(b);
    v1::HeartbeatRequest alive;  // lost once blamed: NotFound then
    alive.set_worker_id(c);
    alive.set_job("j");
    alive.set_generation(1);
    (void)c_->registrations().Heartbeat(alive);
    c_->Tick();
  }
  EXPECT_EQ(Job().state(), v1::RECOVERING);
  EXPECT_THAT(Job().message(),
              HasSubstr("rank 2 (w3 on hostc pid 100, hostc:1) lost: rank 0 "
                        "reports: the stream from rank 2 broke"));
}

TEST_F(ElasticTest, ARegroupNobodyAskedForIsRefused) {
  const std::string a = Register("hosta"), b = Register("hostb"),
                    c = Register("hostc");
  ASSERT_TRUE(c_->submissions().Submit(kElasticJob).ok());
  const absl::Status s = c_->reports().Finish(Regrouped(a, 0, 5));
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_EQ(s.message(),
            "a regroup report from rank 0 of job j generation 1, which the "
            "coordinator did not ask to regroup");
  EXPECT_EQ(Job().state(), v1::RUNNING);
}

}  // namespace
}  // namespace lockstep
