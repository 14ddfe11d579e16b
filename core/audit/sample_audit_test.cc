// The sample audit's check over written files: a run without faults is
// the shard plan's, once per sample; a generation that redid steps has the
// old ones thrown away; a shrunk world's records count; a rank that
// consumed another replica's samples, samples that are not the plan's, a
// step missing in the middle and a malformed line are each named.
#include "core/audit/sample_audit.h"

#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "core/audit/audit_check.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;

// 100 samples, global batch 20 (5 steps an epoch), 2 epochs, shuffled.
class AuditTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = JoinPath(
        ::testing::TempDir(),
        std::string(
            ::testing::UnitTest::GetInstance()->current_test_info()->name()) +
            ".jsonl");
    ::unlink(path_.c_str());
    spec_.name = "a";
    spec_.seed = 7;
    spec_.batch_size_per_replica = 10;
    spec_.cluster.workers = 2;
    absl::StatusOr<std::unique_ptr<AuditLog>> log =
        AuditLog::Open(path_, spec_);
    ASSERT_TRUE(log.ok()) << log.status();
    log_ = std::move(*log);
  }
  // What rank `rank` of a world of `world` workers (one replica each)
  // consumed at `step`, as a TrainingSession records it.
  SampleRecord Record(int64_t generation, int64_t rank, int64_t world,
                      int64_t step) {
    ShardPlan plan(100, 20, world, spec_.seed, true);
    Batch b;
    b.global_step = step;
    b.epoch = step / 5;
    b.step_in_epoch = step % 5;
    b.indices = plan.ReplicaSlice(b.epoch, b.step_in_epoch, rank);
    SampleRecord r = RecordOf(plan, b, {rank});
    r.generation = generation;
    r.rank = rank;
    return r;
  }
  void Steps(int64_t generation, int64_t world, int64_t from, int64_t to) {
    for (int64_t s = from; s < to; ++s) {
      for (int64_t rank = 0; rank < world; ++rank) {
        ASSERT_TRUE(log_->Add(Record(generation, rank, world, s)).ok());
      }
    }
  }
  AuditReport Check() {
    absl::StatusOr<AuditReport> r = CheckAudit(path_);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : AuditReport();
  }
  std::string path_;
  JobSpec spec_;
  std::unique_ptr<AuditLog> log_;
};

TEST_F(AuditTest, ARunWithoutFaultsIsTheShardPlanOncePerSample) {
  ASSERT_TRUE(log_->Generation(1, 0, 2).ok());
  Steps(1, 2, 0, 10);
  const AuditReport r = Check();
  EXPECT_TRUE(r.exactly_once()) << FormatAudit(r);
  ASSERT_EQ(r.epochs.size(), 2u);
  for (const AuditReport::Epoch& e : r.epochs) {
    EXPECT_EQ(e.samples, 100);
    EXPECT_EQ(e.once, 100);
    EXPECT_EQ(e.never + e.more, 0);
    EXPECT_EQ(e.steps, 5);
    EXPECT_TRUE(e.complete);
  }
  EXPECT_EQ(r.accepted, 20);
  EXPECT_EQ(r.thrown_away, 0);
  EXPECT_EQ(FormatAudit(r),
            "job a: generations 1 from step 0 on 2 replicas\n"
            "epoch 0: 100 samples: 100 seen once, 0 never, 0 more than once "
            "(5 of 5 steps)\n"
            "epoch 1: 100 samples: 100 seen once, 0 never, 0 more than once "
            "(5 of 5 steps)\n"
            "records: 20 accepted, 0 thrown away (steps a later generation "
            "redid), 0 repeated calls\n"
            "every sample of every complete epoch was seen exactly once\n");
}

TEST_F(AuditTest, StepsALaterGenerationRedidAreThrownAway) {
  // Generation 1 reached step 6 on rank 0 (rank 1 died at 5); generation 2
  // resumed from the checkpoint of step 4 on one worker (a shrink), then
  // generation 3 grew back to 2 from step 8.
  ASSERT_TRUE(log_->Generation(1, 0, 2).ok());
  Steps(1, 2, 0, 6);
  ASSERT_TRUE(log_->Add(Record(1, 0, 2, 6)).ok());
  ASSERT_TRUE(log_->Generation(2, 4, 1).ok());
  Steps(2, 1, 4, 8);
  ASSERT_TRUE(log_->Generation(3, 8, 2).ok());
  Steps(3, 2, 8, 10);
  ASSERT_TRUE(log_->Add(Record(3, 1, 2, 9)).ok());  // a retried call
  const AuditReport r = Check();
  EXPECT_TRUE(r.exactly_once()) << FormatAudit(r);
  EXPECT_EQ(r.thrown_away, 5);  // steps 4, 5 (2 ranks) and 6 of generation 1
  EXPECT_EQ(r.duplicates, 1);
  EXPECT_EQ(r.accepted, 8 + 4 + 4);
  ASSERT_EQ(r.epochs.size(), 2u);
  EXPECT_EQ(r.epochs[0].once, 100);
  EXPECT_EQ(r.epochs[1].once, 100);
}

TEST_F(AuditTest, AnotherReplicasSamplesAreNamed) {
  ASSERT_TRUE(log_->Generation(1, 0, 2).ok());
  Steps(1, 2, 0, 4);
  SampleRecord wrong = Record(1, 0, 2, 4);
  wrong.rank = 1;  // rank 1 took replica 0's share too
  ASSERT_TRUE(log_->Add(Record(1, 0, 2, 4)).ok());
  ASSERT_TRUE(log_->Add(wrong).ok());
  const AuditReport r = Check();
  EXPECT_FALSE(r.exactly_once());
  EXPECT_THAT(FormatAudit(r),
              HasSubstr("problem: step 4 (generation 1): replicas not "
                        "recorded: 1 recorded twice: 0"));
  EXPECT_EQ(r.epochs[0].more, 10);
  EXPECT_EQ(r.epochs[0].never, 10);
  EXPECT_THAT(FormatAudit(r), HasSubstr("NOT exactly once"));
}

TEST_F(AuditTest, SamplesThatAreNotThePlansAreNamed) {
  ASSERT_TRUE(log_->Generation(1, 0, 2).ok());
  Steps(1, 2, 0, 2);
  SampleRecord r2 = Record(1, 0, 2, 2);
  r2.hash ^= 1;  // consumed other indices at the plan's positions
  ASSERT_TRUE(log_->Add(r2).ok());
  ASSERT_TRUE(log_->Add(Record(1, 1, 2, 2)).ok());
  const AuditReport r = Check();
  EXPECT_FALSE(r.exactly_once());
  ASSERT_EQ(r.problems.size(), 2u) << FormatAudit(r);
  EXPECT_THAT(r.problems[0],
              HasSubstr("step 2 (generation 1, rank 0): the samples consumed "
                        "(10, hash"));
  EXPECT_THAT(r.problems[0], HasSubstr("are not the shard plan's (10, hash"));
}

TEST_F(AuditTest, AStepMissingInTheMiddleLeavesSamplesNeverSeen) {
  ASSERT_TRUE(log_->Generation(1, 0, 2).ok());
  Steps(1, 2, 0, 2);
  Steps(1, 2, 3, 6);  // step 2 lost
  const AuditReport r = Check();
  EXPECT_FALSE(r.exactly_once());
  ASSERT_EQ(r.epochs.size(), 2u);
  EXPECT_TRUE(r.epochs[0].complete);
  EXPECT_EQ(r.epochs[0].never, 20);
  EXPECT_EQ(r.epochs[0].once, 80);
  EXPECT_FALSE(r.epochs[1].complete);  // one step of five: still running
}

TEST_F(AuditTest, AMalformedLineIsAnErrorNamingFileAndLine) {
  ASSERT_TRUE(log_->Generation(1, 0, 2).ok());
  log_.reset();
  std::string text = *ReadFile(path_);
  text += "{\"kind\": \"samples\", \"generation\": 1}\n";
  ASSERT_TRUE(WriteFileAtomic(path_, text).ok());
  absl::StatusOr<AuditReport> r = CheckAudit(path_);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr(path_ + " line 3: missing field \"rank\""));
  EXPECT_THAT(CheckAudit(path_ + ".none").status().message(),
              HasSubstr("No such file"));
}

}  // namespace
}  // namespace lockstep
