// /metrics and /api/state computed from a coordinator driven without the
// network: job states, progress, curves, checkpoints, workers.
#include "coordinator/ops_endpoints.h"

#include "base/file_util.h"
#include "coordinator/coordinator_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/rpc_util.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace v1 = lockstep::v1;

constexpr const char* kJob = testing::kTwoWorkerJob;

class OpsEndpointsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorOptions o;
    o.storage_dir = JoinPath(
        ::testing::TempDir(),
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    c_ = std::make_unique<Coordinator>(o);
    ASSERT_TRUE(c_->LoadJournal().ok());
  }
  std::string Register(const std::string& name) {
    v1::RegisterRequest r = testing::TestRegistration("host-" + name);
    r.set_collective_address(name + ":1");
    r.set_name(name);
    return c_->registrations().Register(r, "peer")->worker_id();
  }
  // Rank 0's progress report of generation 1 of job "j" at `step`.
  static v1::ProgressReport RankZeroReport(const std::string& worker,
                                           int64_t step) {
    v1::ProgressReport r;
    r.set_worker_id(worker);
    r.set_job("j");
    r.set_generation(1);
    r.set_rank(0);
    r.set_step(step);
    return r;
  }
  std::unique_ptr<Coordinator> c_;
};

TEST_F(OpsEndpointsTest, MetricsCountJobsByStateAndDescribeEachJob) {
  ASSERT_TRUE(c_->submissions().Submit(kJob).ok());
  std::string t = CoordinatorMetricsText(c_->Ops(), c_->ready());
  EXPECT_THAT(t, HasSubstr("\nlockstep_coordinator_ready 1\n"));
  EXPECT_THAT(t, HasSubstr("\nlockstep_coordinator_leading 1\n"));
  EXPECT_THAT(
      t, HasSubstr("\nlockstep_coordinator_journal_writes_refused_total 0\n"));
  // A standby behind etcd, and a deposed leader's refused writes.
  Coordinator::OpsView standby;
  standby.not_serving = std::string(kNotLeaderPrefix) +
                        "a standby; the leader is 10.0.0.1:7070 (term 3)";
  standby.refused_journal_writes = 2;
  const std::string s = CoordinatorMetricsText(standby, false);
  EXPECT_THAT(s, HasSubstr("\nlockstep_coordinator_leading 0\n"));
  EXPECT_THAT(
      s, HasSubstr("\nlockstep_coordinator_journal_writes_refused_total 2\n"));
  EXPECT_THAT(t, HasSubstr("lockstep_jobs{state=\"PENDING\"} 1\n"));
  EXPECT_THAT(t, HasSubstr("lockstep_jobs{state=\"RUNNING\"} 0\n"));
  EXPECT_THAT(t,
              HasSubstr("lockstep_job_state{job=\"j\",state=\"PENDING\"} 1"));
  EXPECT_THAT(t, HasSubstr("# TYPE lockstep_job_restarts_total counter\n"));
  EXPECT_THAT(t, HasSubstr("lockstep_workers{state=\"idle\"} 0\n"));

  Register("w1");
  Register("w2");
  t = CoordinatorMetricsText(c_->Ops(), c_->ready());
  EXPECT_THAT(t, HasSubstr("lockstep_jobs{state=\"RUNNING\"} 1\n"));
  EXPECT_THAT(t, HasSubstr("lockstep_job_generation{job=\"j\"} 1\n"));
  EXPECT_THAT(t, HasSubstr("lockstep_job_world_workers{job=\"j\"} 2\n"));
  EXPECT_THAT(t, HasSubstr(
                     "lockstep_job_membership_changes_total{job=\"j\"} 0\n"));
  EXPECT_THAT(t, HasSubstr("lockstep_workers{state=\"busy\"} 2\n"));
  EXPECT_THAT(t,
              HasSubstr("lockstep_worker_heartbeat_age_seconds{worker=\"w1\","
                        "name=\"w1\",host=\"host-w1\"}"));
}

// Heartbeat timings name a straggler: in status (text, rank, cause), as an
// event once, and on /metrics, with each worker's figures.
TEST_F(OpsEndpointsTest, AStragglerIsNamedFromTheRanksTimings) {
  ASSERT_TRUE(c_->submissions().Submit(kJob).ok());
  const std::string w1 = Register("w1");
  const std::string w2 = Register("w2");
  auto beat = [&](const std::string& id, double compute_ms) {
    v1::HeartbeatRequest r;
    r.set_worker_id(id);
    r.set_job("j");
    r.set_generation(1);
    v1::RankTiming* t = r.mutable_timing();
    t->set_ring_bytes(8 << 20);
    t->set_ring_seconds(8 * 0.002);  // 2 ms/MiB both ways: no slow link
    t->set_steps(10);
    t->set_compute_seconds(10 * compute_ms / 1e3);
    ASSERT_TRUE(c_->registrations().Heartbeat(r).ok());
  };
  beat(w1, 40);
  beat(w2, 41);
  c_->Tick();
  absl::StatusOr<v1::JobStatus> s = c_->views().Get("j");
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->has_straggler());
  beat(w2, 130);
  c_->Tick();
  c_->Tick();
  s = c_->views().Get("j");
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->has_straggler());
  EXPECT_EQ(s->straggler().rank(), 1);
  EXPECT_EQ(s->straggler().cause(), "compute");
  EXPECT_EQ(s->straggler().text(),
            "rank 1 (w2 on host-w2): its own work takes 130.0 ms a step "
            "against 40.0 ms on the fastest rank: every other rank waits for "
            "it");
  int events = 0;
  for (const std::string& e : s->events()) {
    if (e.find("straggler: rank 1 (w2 on host-w2)") != std::string::npos) {
      ++events;
    }
  }
  EXPECT_EQ(events, 1);
  EXPECT_DOUBLE_EQ(s->workers(1).compute_ms_per_step(), 130);
  EXPECT_DOUBLE_EQ(s->workers(0).ring_ms_per_mib(), 2);
  const std::string t = CoordinatorMetricsText(c_->Ops(), c_->ready());
  EXPECT_THAT(t, HasSubstr("lockstep_job_straggler{job=\"j\",rank=\"1\","
                           "worker=\"" + w2 + "\",cause=\"compute\"} 1\n"));
  EXPECT_THAT(t, HasSubstr("lockstep_worker_compute_ms_per_step{worker=\"" +
                           w2 + "\",name=\"w2\",host=\"host-w2\"} 130\n"));
  // Alike again: nobody is named.
  beat(w2, 42);
  c_->Tick();
  s = c_->views().Get("j");
  EXPECT_FALSE(s->has_straggler());
  EXPECT_THAT(CoordinatorMetricsText(c_->Ops(), c_->ready()),
              Not(HasSubstr("lockstep_job_straggler{")));
}

TEST_F(OpsEndpointsTest, ReportsDrawCurvesAndSetTheProgressFigures) {
  ASSERT_TRUE(c_->submissions().Submit(kJob).ok());
  const std::string rank0 = Register("w1");
  Register("w2");
  v1::ProgressReport r = RankZeroReport(rank0, 10);
  r.set_total_steps(20);
  r.set_loss(0.6);
  r.set_accuracy(0.7);
  r.set_samples_per_sec(1234);
  for (int step : {5, 10}) {
    for (const auto& [tag, v] :
         {std::pair<const char*, double>{"train/loss", 0.9 - step * 0.01},
          {"train/accuracy", 0.5 + step * 0.01}}) {
      auto* s = r.add_scalars();
      s->set_step(step);
      s->set_tag(tag);
      s->set_value(v);
    }
  }
  for (const auto& [tag, v] : {std::pair<const char*, double>{"eval/loss", 0.5},
                               {"eval/accuracy", 0.8}}) {
    auto* s = r.add_scalars();
    s->set_step(10);
    s->set_tag(tag);
    s->set_value(v);
  }
  ASSERT_TRUE(c_->reports().ReportProgress(r).ok());
  const Coordinator::OpsView view = c_->Ops();
  const std::string t = CoordinatorMetricsText(view, true);
  EXPECT_THAT(t, HasSubstr("lockstep_job_step{job=\"j\"} 10\n"));
  EXPECT_THAT(t, HasSubstr("lockstep_job_total_steps{job=\"j\"} 20\n"));
  EXPECT_THAT(t, HasSubstr("lockstep_job_loss{job=\"j\"} 0.6\n"));
  EXPECT_THAT(t,
              HasSubstr("lockstep_job_samples_per_second{job=\"j\"} 1234\n"));
  EXPECT_THAT(t, HasSubstr("lockstep_job_test_accuracy{job=\"j\"} 0.8\n"));
  // Not an fp16 job: no loss scale.
  EXPECT_THAT(t, Not(HasSubstr("lockstep_job_loss_scale")));
  EXPECT_EQ(view.jobs[0].status.loss_scale(), 0.0);

  const nlohmann::json s = DashboardState(view);
  ASSERT_EQ(s["jobs"].size(), 1u);
  const nlohmann::json& j = s["jobs"][0];
  EXPECT_EQ(j["name"], "j");
  EXPECT_EQ(j["state"], "RUNNING");
  EXPECT_EQ(j["generation"], 1);
  EXPECT_EQ(j["step"], 10);
  ASSERT_EQ(j["train"].size(), 2u);
  EXPECT_EQ(j["train"][0][0], 5);
  EXPECT_DOUBLE_EQ(j["train"][1][1].get<double>(), 0.8);
  EXPECT_DOUBLE_EQ(j["train"][1][2].get<double>(), 0.6);
  ASSERT_EQ(j["eval"].size(), 1u);
  EXPECT_DOUBLE_EQ(j["eval"][0][2].get<double>(), 0.8);
  ASSERT_EQ(s["workers"].size(), 2u);
  EXPECT_EQ(s["workers"][0]["name"], "w1");
  EXPECT_EQ(s["workers"][0]["job"], "j");
  EXPECT_EQ(s["workers"][1]["rank"], 1);
  EXPECT_TRUE(s["workers"][1]["alive"].get<bool>());

  // Once the job ends, its rate, ETA and live workers are 0 (they kept the
  // running values: a dashboard read a cancelled job as training).
  EXPECT_THAT(t, HasSubstr("lockstep_job_workers_alive{job=\"j\"} 2\n"));
  ASSERT_TRUE(c_->submissions().Cancel("j").ok());
  const std::string after = CoordinatorMetricsText(c_->Ops(), true);
  EXPECT_THAT(after,
              HasSubstr("lockstep_job_state{job=\"j\",state=\"CANCELLED\"} 1"));
  EXPECT_THAT(after,
              HasSubstr("lockstep_job_samples_per_second{job=\"j\"} 0\n"));
  EXPECT_THAT(after, HasSubstr("lockstep_job_eta_seconds{job=\"j\"} 0\n"));
  EXPECT_THAT(after, HasSubstr("lockstep_job_workers_alive{job=\"j\"} 0\n"));
  EXPECT_THAT(after, HasSubstr("lockstep_job_step{job=\"j\"} 10\n"));
}

// precision "fp16": rank 0's loss scale and skipped steps reach the status
// and /metrics.
TEST_F(OpsEndpointsTest, TheFp16LossScaleIsAMetric) {
  ASSERT_TRUE(c_->submissions().Submit(kJob).ok());
  const std::string rank0 = Register("w1");
  Register("w2");
  v1::ProgressReport r = RankZeroReport(rank0, 10);
  r.set_loss_scale(32768);
  r.set_skipped_steps(3);
  ASSERT_TRUE(c_->reports().ReportProgress(r).ok());
  const Coordinator::OpsView view = c_->Ops();
  ASSERT_EQ(view.jobs.size(), 1u);
  EXPECT_EQ(view.jobs[0].status.loss_scale(), 32768.0);
  EXPECT_EQ(view.jobs[0].status.skipped_steps(), 3);
  const std::string t = CoordinatorMetricsText(view, true);
  EXPECT_THAT(t, HasSubstr("lockstep_job_loss_scale{job=\"j\"} 32768\n"));
  EXPECT_THAT(t, HasSubstr("lockstep_job_skipped_steps{job=\"j\"} 3\n"));
}

TEST_F(OpsEndpointsTest, ARestartedGenerationContinuesTheCurveFromItsStep) {
  ASSERT_TRUE(c_->submissions().Submit(kJob).ok());
  const std::string rank0 = Register("w1");
  Register("w2");
  auto report = [&](int step) {
    v1::ProgressReport r;
    r.set_worker_id(rank0);
    r.set_job("j");
    r.set_generation(1);
    r.set_rank(0);
    r.set_step(step);
    auto* s = r.add_scalars();
    s->set_step(step);
    s->set_tag("train/loss");
    s->set_value(1.0 / step);
    ASSERT_TRUE(c_->reports().ReportProgress(r).ok());
  };
  report(5);
  report(10);
  report(15);
  report(10);  // replayed from a checkpoint at step 5
  const nlohmann::json s = DashboardState(c_->Ops());
  const nlohmann::json& train = s["jobs"][0]["train"];
  ASSERT_EQ(train.size(), 2u) << train;
  EXPECT_EQ(train[0][0], 5);
  EXPECT_EQ(train[1][0], 10);
}

TEST_F(OpsEndpointsTest, RoutesServeTheDashboardAndItsState) {
  std::map<std::string, HttpHandler> routes = CoordinatorRoutes(c_.get());
  ASSERT_EQ(routes.count("/"), 1u);
  HttpReply page = routes["/"]({});
  EXPECT_EQ(page.content_type, "text/html; charset=utf-8");
  EXPECT_THAT(page.body, HasSubstr("<title>lockstep</title>"));
  EXPECT_THAT(page.body, HasSubstr("fetch(\"api/state\""));
  EXPECT_THAT(page.body, HasSubstr("this coordinator does not serve: "));
  HttpReply state = routes["/api/state"]({});
  EXPECT_EQ(state.content_type, "application/json");
  EXPECT_EQ(nlohmann::json::parse(state.body)["jobs"].size(), 0u);
  EXPECT_EQ(nlohmann::json::parse(state.body)["not_serving"], "");
  // A standby's state says why it holds nothing, naming the leader.
  Coordinator::OpsView standby;
  standby.not_serving = std::string(kNotLeaderPrefix) +
                        "a standby; the leader is 10.0.0.1:7070 (term 3)";
  EXPECT_EQ(DashboardState(standby)["not_serving"],
            std::string(kNotLeaderPrefix) +
                "a standby; the leader is 10.0.0.1:7070 (term 3)");
  HttpReply metrics = routes["/metrics"]({});
  EXPECT_THAT(metrics.body, HasSubstr("lockstep_coordinator_ready 1"));
  EXPECT_THAT(metrics.body, Not(HasSubstr("lockstep_job_step{")));
}

}  // namespace
}  // namespace lockstep
