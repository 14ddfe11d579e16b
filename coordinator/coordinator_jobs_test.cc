// The coordinator's job lifecycle without the network: gang start and rank
// order, assignments through heartbeats, STOP after a cancel, fingerprint
// mismatches failing the job with the ranks named, an idle worker leaving,
// and a job that succeeds writing result.json.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "coordinator/coordinator.h"
#include "coordinator/coordinator_test_fixture.h"
#include "core/checkpoint/checkpoint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using testing::CoordinatorTest;
using ::testing::HasSubstr;
using testing::kJob;
namespace v1 = lockstep::v1;

TEST_F(CoordinatorTest, PendingUntilTwoWorkersThenRanksInRegistrationOrder) {
  const std::string a = Register("hosta");
  absl::StatusOr<v1::JobStatus> s = c_->submissions().Submit(kJob);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->state(), v1::PENDING);
  EXPECT_THAT(s->message(),
              HasSubstr("needs 2 with >= 1 replicas each; 1 idle qualify"));
  EXPECT_EQ(Beat(a).command(), v1::HeartbeatResponse::NONE);
  const std::string b = Register("hostb");
  EXPECT_EQ(c_->views().Get("j")->state(), v1::RUNNING);
  EXPECT_EQ(c_->views().Get("j")->generation(), 1);
  v1::HeartbeatResponse hb = Beat(b);
  ASSERT_EQ(hb.command(), v1::HeartbeatResponse::RUN);
  EXPECT_EQ(hb.assignment().rank(), 1);
  EXPECT_EQ(hb.assignment().world_size(), 2);
  EXPECT_EQ(hb.assignment().peers(0), "hosta:1");
  EXPECT_EQ(hb.assignment().peers(1), "hostb:1");
  EXPECT_EQ(Beat(a).assignment().rank(), 0);
  // The same spec again returns the running job; another spec is refused.
  bool existing = false;
  absl::StatusOr<v1::JobStatus> again =
      c_->submissions().Submit(kJob, SubmitMode::kNew, &existing);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(existing);
  EXPECT_EQ(again->generation(), 1);
  EXPECT_EQ(c_->views().Get("j")->generation(), 1);
  std::string other = kJob;
  other.replace(other.find("\"seed\": 1"), 9, "\"seed\": 2");
  absl::StatusOr<v1::JobStatus> refused = c_->submissions().Submit(other);
  EXPECT_TRUE(absl::IsAlreadyExists(refused.status())) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::HasSubstr("job \"j\" is already RUNNING at step 0 "
                                   "with another spec: seed (1 -> 2)"));
}

// Jobs start in the order submitted: one that waits for more workers than
// there are holds the next, and the next says behind which job (it said
// "2 idle qualify"), until that one is cancelled.
TEST_F(CoordinatorTest, AJobQueuedBehindAWaitingOneSaysSoAndStartsAfterIt) {
  Register("hosta");
  Register("hostb");
  std::string big = kJob;
  big.replace(big.find("\"name\": \"j\""), 11, "\"name\": \"big\"");
  big.replace(big.find("\"workers\": 2"), 12, "\"workers\": 3");
  ASSERT_TRUE(c_->submissions().Submit(big).ok());
  absl::StatusOr<v1::JobStatus> s = c_->submissions().Submit(kJob);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(c_->views().Get("big")->state(), v1::PENDING);
  EXPECT_THAT(c_->views().Get("big")->message(),
              HasSubstr("needs 3 with >= 1 replicas each; 2 idle qualify"));
  absl::StatusOr<v1::JobStatus> j = c_->views().Get("j");
  EXPECT_EQ(j->state(), v1::PENDING);
  EXPECT_EQ(j->message(),
            "queued behind job \"big\", submitted before it and still "
            "waiting for workers (jobs start in the order submitted: cancel "
            "it, or add the workers it needs)");
  EXPECT_EQ(j->waiting_for(), "job \"big\" to start");
  ASSERT_TRUE(c_->submissions().Cancel("big").ok());
  EXPECT_EQ(c_->views().Get("j")->state(), v1::RUNNING);
}

// A generation's ranks load the step it starts from, even when a later
// checkpoint was committed since (the previous generation's slices, in
// before its failure, committed after the start); a step with no
// checkpoint is DataLoss naming the folder.
TEST_F(CoordinatorTest, ACheckpointIsServedAtTheAskedStepAfterALaterCommit) {
  ASSERT_TRUE(c_->submissions().Submit(kJob).ok());
  CheckpointStore store(JoinPath(Options().storage_dir, "jobs/j/checkpoints"),
                        3);
  Tensor w({3}, {1, 2, 3}), m({3}, {4, 5, 6});
  for (int64_t step : {100, 200}) {
    CheckpointState state;
    state.step = step;
    w.data()[0] = static_cast<float>(step);
    ASSERT_TRUE(store.Commit(state, {{"w", &w}}, {{"adam/m/w", &m}}).ok());
  }
  absl::StatusOr<LoadedCheckpoint> at =
      c_->checkpoints().LoadCheckpoint("j", 100);
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_EQ(at->state.step, 100);
  ASSERT_EQ(at->model.size(), 1u);
  EXPECT_EQ(at->model[0].second.data()[0], 100.0f);
  at = c_->checkpoints().LoadCheckpoint("j", 200);
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_EQ(at->model[0].second.data()[0], 200.0f);
  at = c_->checkpoints().LoadCheckpoint("j", 150);
  EXPECT_TRUE(absl::IsDataLoss(at.status())) << at.status();
  EXPECT_EQ(at.status().message(), "checkpoint step-00000150 of job j (" +
                                       store.dir() +
                                       "/step-00000150): state.json: missing");
  EXPECT_TRUE(
      absl::IsNotFound(c_->checkpoints().LoadCheckpoint("k", 100).status()));
}

TEST_F(CoordinatorTest, CancelSendsStopAndFreesTheWorkers) {
  const std::string a = Register("hosta"), b = Register("hostb");
  ASSERT_TRUE(c_->submissions().Submit(kJob).ok());
  ASSERT_EQ(Beat(a).command(), v1::HeartbeatResponse::RUN);
  absl::StatusOr<v1::JobStatus> s = c_->submissions().Cancel("j");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->state(), v1::CANCELLED);
  v1::HeartbeatResponse hb = Beat(a, "j", 1);
  EXPECT_EQ(hb.command(), v1::HeartbeatResponse::STOP);
  EXPECT_THAT(hb.reason(), HasSubstr("cancelled at step 0"));
  Beat(a);  // idle again
  v1::ListJobsResponse l = c_->views().List();
  ASSERT_EQ(l.workers_size(), 2);
  EXPECT_EQ(l.workers(0).job(), "");
  EXPECT_TRUE(absl::IsNotFound(c_->submissions().Cancel("nope").status()));
}

TEST_F(CoordinatorTest, FingerprintMismatchFailsNamingTheRanks) {
  // The failure is an error in the log (--log-format json's level).
  std::vector<LogRecord> logged;
  CoordinatorOptions o = Options();
  o.log = [&](const LogRecord& r) { logged.push_back(r); };
  c_ = std::make_unique<Coordinator>(o);
  Register("hosta");
  Register("hostb");
  ASSERT_TRUE(c_->submissions().Submit(kJob).ok());
  Fingerprint(0, 5, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
  Fingerprint(1, 5, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
  EXPECT_EQ(c_->views().Get("j")->state(), v1::RUNNING);
  Fingerprint(0, 10, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
  Fingerprint(1, 10, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
  absl::StatusOr<v1::JobStatus> s = c_->views().Get("j");
  EXPECT_EQ(s->state(), v1::FAILED);
  EXPECT_THAT(s->message(),
              HasSubstr("parameters diverged across workers at step 10 "
                        "(fingerprints rank 0 aaaaaaaaaaaaaaaa, rank 1 "
                        "bbbbbbbbbbbbbbbb)"));
  ASSERT_FALSE(logged.empty());
  EXPECT_TRUE(absl::StartsWith(logged.back().message, "FAILED: "))
      << logged.back().message;
  EXPECT_EQ(logged.back().level, "error");
  EXPECT_EQ(logged.back().job, "j");
}

TEST_F(CoordinatorTest, AnIdleWorkerLeavingIsNeverHandedAJob) {
  const std::string a = Register("hosta");
  const std::string b = Register("hostb");
  v1::FinishRequest leave;
  leave.set_worker_id(b);
  leave.set_leaving(true);
  leave.set_error("the worker is shutting down");
  std::string over;
  ASSERT_TRUE(c_->reports().Finish(leave, &over).ok());
  EXPECT_EQ(over, "");  // it had no job
  absl::StatusOr<v1::JobStatus> s = c_->submissions().Submit(kJob);
  ASSERT_TRUE(s.ok());
  // Only one member is left: the job waits instead of starting on a worker
  // that is gone.
  EXPECT_EQ(s->state(), v1::PENDING);
  EXPECT_THAT(s->message(), HasSubstr("1 idle qualify"));
  const std::string c = Register("hostc");
  EXPECT_EQ(c_->views().Get("j")->state(), v1::RUNNING);
  EXPECT_EQ(Beat(c).assignment().rank(), 1);
  EXPECT_EQ(Beat(a).assignment().rank(), 0);
}

TEST_F(CoordinatorTest, AllRanksFinishingWithOneFingerprintSucceeds) {
  Register("hosta");
  Register("hostb");
  ASSERT_TRUE(c_->submissions().Submit(kJob).ok());
  for (int rank : {0, 1})
    ASSERT_TRUE(c_->reports().Finish(Finished(rank, 0.75)).ok());
  absl::StatusOr<v1::JobStatus> s = c_->views().Get("j");
  EXPECT_EQ(s->state(), v1::SUCCEEDED) << s->message();
  EXPECT_EQ(s->test_accuracy(), 0.75);
  EXPECT_THAT(s->result_path(), HasSubstr("/jobs/j/result.json"));
}

// Reports for a rank outside the ring, or in another worker's name, are
// refused, naming it, and change nothing: no fingerprint beside the real ones,
// no finished rank (two such Finish reports used to crash the coordinator in
// CompleteIfDone).
TEST_F(CoordinatorTest, ReportsFromOutsideTheRingAreRefused) {
  Register("hosta");
  Register("hostb");
  ASSERT_TRUE(c_->submissions().Submit(kJob).ok());
  for (int rank : {2, 5, -1}) {
    v1::ProgressReport r;
    r.set_job("j");
    r.set_generation(1);
    r.set_rank(rank);
    r.set_fingerprint_step(5);
    r.set_fingerprint("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
    absl::StatusOr<v1::ReportResponse> got = c_->reports().ReportProgress(r);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().message(),
              absl::StrCat("a progress report for rank ", rank,
                           " of job j, which has ranks 0..1"));
    v1::FinishRequest f;
    f.set_job("j");
    f.set_generation(1);
    f.set_rank(rank);
    f.set_steps(5);
    const absl::Status finished = c_->reports().Finish(f);
    ASSERT_FALSE(finished.ok());
    EXPECT_EQ(finished.message(),
              absl::StrCat("a finish report for rank ", rank,
                           " of job j, which has ranks 0..1"));
  }
  // In another rank's name: refused, naming both workers.
  v1::ProgressReport posing;
  posing.set_worker_id(RankHolder(0));
  posing.set_job("j");
  posing.set_generation(1);
  posing.set_rank(1);
  posing.set_fingerprint_step(5);
  posing.set_fingerprint("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
  absl::StatusOr<v1::ReportResponse> posed =
      c_->reports().ReportProgress(posing);
  ASSERT_FALSE(posed.ok());
  EXPECT_EQ(posed.status().message(),
            "a progress report for rank 1 of job j from worker \"w1\", but "
            "rank 1 of generation 1 is worker w2");
  v1::FinishRequest posing_finish =
      Failed("w2", 1, 0, "diverged", absl::StatusCode::kInternal);
  const absl::Status finish_posed = c_->reports().Finish(posing_finish);
  EXPECT_EQ(finish_posed.message(),
            "a finish report for rank 0 of job j from worker \"w2\", but "
            "rank 0 of generation 1 is worker w1");
  Fingerprint(0, 5, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
  Fingerprint(1, 5, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
  EXPECT_EQ(c_->views().Get("j")->state(), v1::RUNNING);
}

}  // namespace
}  // namespace lockstep
