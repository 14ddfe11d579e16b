// Fencing where it happens: once generation 2 of a job runs, every request
// that names generation 1 — a progress report, checkpoint slices, a finish
// report, an NCCL id — is refused, the sender told to stop, counted in
// JobStatus.fenced and /metrics, and changes nothing: no step, no
// fingerprint, no checkpoint byte, no rank.
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/coordinator.h"
#include "coordinator/coordinator_test_fixture.h"
#include "coordinator/journal_store.h"
#include "coordinator/ops_endpoints.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/tensor_wire.h"

namespace lockstep {
namespace {

using testing::CoordinatorTest;
using ::testing::HasSubstr;
namespace v1 = lockstep::v1;

class FencingTest : public CoordinatorTest {
 protected:
  // Generation 1 on w1 (rank 0) and w2 (rank 1); w2 goes silent past the
  // worker timeout and the spare w3 takes its rank in generation 2.
  void SetUp() override {
    CoordinatorTest::SetUp();
    w1_ = Register("hosta");
    w2_ = Register("hostb");
    ASSERT_TRUE(c_->submissions()
                    .Submit(R"({
      "name": "j", "seed": 1,
      "model": {"input_shape": [4], "layers": [{"type": "dense", "units": 2}]},
      "data": {"format": "synthetic", "train_samples": 100,
               "test_samples": 10, "num_classes": 2},
      "batch_size_per_replica": 10, "epochs": 1,
      "cluster": {"workers": 2, "replicas_per_worker": 1},
      "restart": {"max_restarts": 3, "backoff_seconds": 0}
    })")
                    .ok());
    Pass(0.4);
    Beat(w1_, "j", 1);
    c_->Tick();
    ASSERT_EQ(c_->views().Get("j")->state(), v1::RECOVERING);
    ASSERT_TRUE(c_->reports()
                    .Finish(Failed(w1_, 1, 0, "stopped by the coordinator",
                                   absl::StatusCode::kCancelled))
                    .ok());
    w3_ = Register("hostc");
    const v1::JobStatus s = *c_->views().Get("j");
    ASSERT_EQ(s.state(), v1::RUNNING);
    ASSERT_EQ(s.generation(), 2);
    ASSERT_EQ(s.workers(1).worker_id(), w3_);
  }
  std::map<std::string, int64_t> Fenced() {
    const v1::JobStatus s = *c_->views().Get("j");
    return {s.fenced().begin(), s.fenced().end()};
  }
  // Rank `rank`'s whole checkpoint slice at `step` of `generation` (the
  // dense layer's kernel from rank 0, its bias from rank 1), sent by the
  // worker that held the rank (w1, then w2 or w3), or by `sender`.
  static std::vector<v1::CheckpointSlice> Slice(int rank, int64_t step,
                                                int64_t generation,
                                                std::string sender = "") {
    v1::CheckpointSlice m;
    if (sender.empty())
      sender = rank == 0 ? "w1" : generation == 1 ? "w2" : "w3";
    m.set_worker_id(sender);
    m.set_job("j");
    m.set_generation(generation);
    m.set_step(step);
    m.set_rank(rank);
    m.set_world_size(2);
    m.set_model_tensors(2);
    m.set_optimizer_tensors(0);
    m.set_seed(1);
    m.set_optimizer_iterations(step);
    Tensor t(rank == 0 ? std::vector<int64_t>{4, 2} : std::vector<int64_t>{2});
    for (int64_t i = 0; i < t.size(); ++i) t.data()[i] = 0.25f * i;
    TensorToWire(rank == 0 ? "dense/kernel" : "dense/bias", false, t,
                 m.mutable_tensor());
    return {m};
  }
  // What the job's checkpoint folder holds (nothing when it is absent).
  std::vector<std::string> Written() const {
    const std::filesystem::path dir =
        std::filesystem::path(::testing::TempDir()) /
        ::testing::UnitTest::GetInstance()->current_test_info()->name() /
        "jobs" / "j" / "checkpoints";
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      names.push_back(e.path().filename().string());
    }
    return names;
  }
  std::string w1_, w2_, w3_;
};

TEST_F(FencingTest, AnOldGenerationsProgressReportIsRefusedAndCounted) {
  v1::ProgressReport r;
  r.set_worker_id(w2_);
  r.set_job("j");
  r.set_generation(1);
  r.set_rank(0);  // rank 0 of generation 1 was w1: as if it were the chief
  r.set_step(55);
  r.set_loss(0.125);
  r.set_fingerprint_step(55);
  r.set_fingerprint("stale");
  absl::StatusOr<v1::ReportResponse> resp = c_->reports().ReportProgress(r);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_TRUE(resp->stop());  // told to stop
  EXPECT_THAT(resp->reason(), HasSubstr("the job is RUNNING"));
  const v1::JobStatus s = *c_->views().Get("j");
  EXPECT_EQ(s.step(), 0);  // nothing taken from it
  EXPECT_EQ(s.loss(), 0);
  EXPECT_EQ(Fenced(), (std::map<std::string, int64_t>{{"progress", 1}}));
  // The current generation's report is not fenced.
  r.set_worker_id(w1_);
  r.set_generation(2);
  r.clear_fingerprint_step();
  ASSERT_FALSE(c_->reports().ReportProgress(r)->stop());
  EXPECT_EQ(c_->views().Get("j")->step(), 55);
  EXPECT_EQ(Fenced(), (std::map<std::string, int64_t>{{"progress", 1}}));
}

TEST_F(FencingTest, AnOldGenerationsCheckpointSlicesCommitNoByte) {
  for (int rank : {0, 1}) {
    absl::StatusOr<v1::CheckpointAck> ack =
        c_->checkpoints().AddCheckpointSlice(Slice(rank, 40, 1));
    ASSERT_TRUE(absl::IsFailedPrecondition(ack.status())) << ack.status();
    EXPECT_EQ(ack.status().message(),
              "checkpoint slice for generation 1 refused: job j is RUNNING at "
              "generation 2");
  }
  EXPECT_EQ(Fenced(),
            (std::map<std::string, int64_t>{{"checkpoint_slice", 2}}));
  EXPECT_EQ(c_->views().Get("j")->checkpoint_path(), "");
  EXPECT_EQ(Written(), std::vector<std::string>{})
      << "bytes from generation 1's slices were written";
  // A current slice sent in another worker's name (w2 no longer holds
  // rank 1) is refused, naming both, and writes nothing either.
  absl::StatusOr<v1::CheckpointAck> stolen =
      c_->checkpoints().AddCheckpointSlice(Slice(1, 40, 2, "w2"));
  ASSERT_TRUE(absl::IsInvalidArgument(stolen.status())) << stolen.status();
  EXPECT_EQ(stolen.status().message(),
            "a checkpoint slice for rank 1 of job j from worker \"w2\", but "
            "rank 1 of generation 2 is worker w3");
  EXPECT_EQ(Written(), std::vector<std::string>{});
  // The same slices from the current generation commit: the refusal was
  // the generation's, not the slices'.
  ASSERT_TRUE(c_->checkpoints().AddCheckpointSlice(Slice(0, 40, 2)).ok());
  absl::StatusOr<v1::CheckpointAck> ack =
      c_->checkpoints().AddCheckpointSlice(Slice(1, 40, 2));
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_TRUE(ack->committed());
  EXPECT_EQ(Fenced(),
            (std::map<std::string, int64_t>{{"checkpoint_slice", 2}}));
}

// The file store, told by the test that this coordinator no longer leads
// (as the etcd store says once its lease lapsed).
class DeposableStore : public FileJournalStore {
 public:
  using FileJournalStore::FileJournalStore;
  std::string NotLeading() const override { return not_leading; }
  std::string not_leading;
};

class DeposedTest : public FencingTest {
 protected:
  void SetUp() override {
    store_ = std::make_shared<DeposableStore>(Options().storage_dir);
    journal_store_ = store_;
    FencingTest::SetUp();
  }
  std::shared_ptr<DeposableStore> store_;
};

// etcd cannot fence the storage: a coordinator that stopped leading
// commits no checkpoint, whatever slices still reach it.
TEST_F(DeposedTest, ACoordinatorThatNoLongerLeadsCommitsNoCheckpoint) {
  store_->not_leading = "a standby; the leader is 10.0.0.2:7070 (term 9)";
  for (int rank : {0, 1}) {
    absl::StatusOr<v1::CheckpointAck> ack =
        c_->checkpoints().AddCheckpointSlice(Slice(rank, 40, 2));
    ASSERT_TRUE(absl::IsUnavailable(ack.status())) << ack.status();
    EXPECT_EQ(ack.status().message(),
              "not the leader: a standby; the leader is 10.0.0.2:7070 (term "
              "9)");
  }
  EXPECT_EQ(c_->views().Get("j")->checkpoint_path(), "");
  EXPECT_EQ(Written(), std::vector<std::string>{});
  EXPECT_EQ(c_->NotServing(),
            "not the leader: a standby; the leader is "
            "10.0.0.2:7070 (term 9)");
  // Leading again (the same term, the lease renewed in time): they commit.
  store_->not_leading = "";
  ASSERT_TRUE(c_->checkpoints().AddCheckpointSlice(Slice(0, 40, 2)).ok());
  absl::StatusOr<v1::CheckpointAck> ack =
      c_->checkpoints().AddCheckpointSlice(Slice(1, 40, 2));
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_TRUE(ack->committed());
}

TEST_F(FencingTest, AnOldGenerationsFinishReportChangesNothing) {
  // A late failure report of generation 1 naming rank 0 of generation 2
  // as its suspect: were it taken, generation 2 would end.
  v1::FinishRequest f = Failed(w2_, 1, 1, "the stream from rank 0 broke",
                               absl::StatusCode::kUnavailable);
  f.add_suspect_ranks(0);
  std::string over;
  ASSERT_TRUE(c_->reports().Finish(f, &over).ok());
  EXPECT_EQ(over, "job j is RUNNING at generation 2 ()");  // told: stop
  v1::JobStatus s = *c_->views().Get("j");
  EXPECT_EQ(s.state(), v1::RUNNING);
  EXPECT_EQ(s.generation(), 2);
  EXPECT_EQ(Fenced(), (std::map<std::string, int64_t>{{"finish", 1}}));
  // A "successful" finish of generation 1 ends nothing either.
  v1::FinishRequest done;
  done.set_worker_id(w1_);
  done.set_job("j");
  done.set_generation(1);
  done.set_rank(0);
  done.set_steps(10);
  done.set_fingerprint("stale");
  over.clear();
  ASSERT_TRUE(c_->reports().Finish(done, &over).ok());
  EXPECT_FALSE(over.empty());
  s = *c_->views().Get("j");
  EXPECT_EQ(s.state(), v1::RUNNING);
  EXPECT_EQ(s.result_path(), "");
  EXPECT_EQ(Fenced(), (std::map<std::string, int64_t>{{"finish", 2}}));
  EXPECT_EQ(Beat(w1_).command(), v1::HeartbeatResponse::RUN);
}

TEST_F(FencingTest, AnOldGenerationsNcclIdIsNeitherKeptNorHanded) {
  auto request = [](const std::string& worker, int64_t generation,
                    const std::string& id) {
    v1::NcclIdRequest r;
    r.set_worker_id(worker);
    r.set_job("j");
    r.set_generation(generation);
    r.set_unique_id(id);
    return r;
  };
  absl::Status published =
      c_->nccl().PublishNcclId(request(w1_, 1, std::string(128, 'o')));
  ASSERT_TRUE(absl::IsFailedPrecondition(published)) << published;
  EXPECT_EQ(published.message(),
            "job j generation 1 is over (the job is RUNNING at generation 2)");
  absl::StatusOr<std::string> fetched =
      c_->nccl().FetchNcclId(request(w2_, 1, ""));
  ASSERT_TRUE(absl::IsFailedPrecondition(fetched.status()));
  EXPECT_EQ(Fenced(), (std::map<std::string, int64_t>{{"nccl_id", 2}}));
  // Generation 2's own id is rank 0's to publish and its ranks' to fetch.
  ASSERT_TRUE(
      c_->nccl().PublishNcclId(request(w1_, 2, std::string(128, 'n'))).ok());
  fetched = c_->nccl().FetchNcclId(request(w3_, 2, ""));
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(*fetched, std::string(128, 'n'));
}

TEST_F(FencingTest, TheCountsReachMetricsAndOutliveARestart) {
  v1::ProgressReport r;
  r.set_worker_id(w2_);
  r.set_job("j");
  r.set_generation(1);
  ASSERT_TRUE(c_->reports().ReportProgress(r).ok());
  ASSERT_TRUE(c_->reports()
                  .Finish(Failed(w2_, 1, 1, "x", absl::StatusCode::kAborted))
                  .ok());
  const std::string metrics = CoordinatorMetricsText(c_->Ops(), true);
  EXPECT_THAT(metrics, HasSubstr("lockstep_job_fenced_total{job=\"j\",kind="
                                 "\"progress\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("lockstep_job_fenced_total{job=\"j\",kind="
                                 "\"finish\"} 1"));
  // A coordinator restarted from the journal keeps them.
  ASSERT_TRUE(c_->SaveJournal().ok());
  c_ = std::make_unique<Coordinator>(Options());
  ASSERT_TRUE(c_->LoadJournal().ok());
  EXPECT_EQ(Fenced(),
            (std::map<std::string, int64_t>{{"finish", 1}, {"progress", 1}}));
}

}  // namespace
}  // namespace lockstep
