#include "worker/worker_metrics.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(WorkerMetricsTest, StepsAccumulateInCountersAndHistograms) {
  WorkerMetrics m;
  StepSample s;
  s.seconds = 0.02;
  s.local_samples = 64;
  s.loss = 0.5;
  s.accuracy = 0.875;
  s.allreduce_seconds = 0.004;
  s.wait_seconds = 0.001;
  s.allreduce_bytes = 1000;
  m.AddStep(1, s);
  m.AddStep(2, s);
  const std::string t = m.Text();
  EXPECT_THAT(t, HasSubstr("# TYPE lockstep_worker_steps_total counter\n"
                           "lockstep_worker_steps_total 2\n"));
  EXPECT_THAT(t, HasSubstr("\nlockstep_worker_samples_total 128\n"));
  EXPECT_THAT(t, HasSubstr("\nlockstep_worker_allreduce_bytes_total 2000\n"));
  EXPECT_THAT(t, HasSubstr("\nlockstep_worker_loss 0.5\n"));
  EXPECT_THAT(t, HasSubstr("\nlockstep_worker_accuracy 0.875\n"));
  EXPECT_THAT(t, HasSubstr("\nlockstep_worker_step 2\n"));
  EXPECT_THAT(t, HasSubstr("lockstep_worker_allreduce_seconds_count 2\n"));
  EXPECT_THAT(t, HasSubstr("lockstep_worker_allreduce_seconds_sum 0.008\n"));
  // 0.004 s falls in the 0.01 bucket, not in the 0.003 one.
  EXPECT_THAT(t,
              HasSubstr("lockstep_worker_allreduce_seconds_bucket{le=\"0.003\"}"
                        " 0\n"));
  EXPECT_THAT(t,
              HasSubstr("lockstep_worker_allreduce_seconds_bucket{le=\"0.01\"}"
                        " 2\n"));
  EXPECT_THAT(t, HasSubstr("lockstep_worker_step_seconds_count 2\n"));
}

TEST(WorkerMetricsTest, AssignmentIsOneLabelledSeriesReplacedPerJob) {
  WorkerMetrics m;
  EXPECT_THAT(m.Text(), HasSubstr("\nlockstep_worker_rank -1\n"));
  m.SetAssignment("mnist", 2, 1, 2);
  EXPECT_THAT(m.Text(),
              HasSubstr("lockstep_worker_assignment{generation=\"2\",job="
                        "\"mnist\",rank=\"1\",world_size=\"2\"} 1\n"));
  m.SetAssignment("mnist", 3, 0, 2);
  m.SetRate(6997);
  const std::string t = m.Text();
  EXPECT_THAT(t, Not(HasSubstr("generation=\"2\"")));
  EXPECT_THAT(t, HasSubstr("generation=\"3\""));
  EXPECT_THAT(t, HasSubstr("\nlockstep_worker_generation 3\n"));
  m.ClearAssignment();
  EXPECT_THAT(m.Text(), Not(HasSubstr("lockstep_worker_assignment{")));
  EXPECT_THAT(m.Text(), HasSubstr("\nlockstep_worker_generation -1\n"));
  // An idle worker's rate is no job's: 0, not the last one's.
  EXPECT_THAT(t, HasSubstr("\nlockstep_worker_samples_per_second 6997\n"));
  EXPECT_THAT(m.Text(), HasSubstr("\nlockstep_worker_samples_per_second 0\n"));
}

TEST(WorkerMetricsTest, RegistrationHeartbeatsCheckpointsAndLeaves) {
  WorkerMetrics m;
  EXPECT_THAT(m.Text(), HasSubstr("\nlockstep_worker_registered 0\n"));
  m.SetRegistered(true);
  m.HeartbeatAnswered();
  m.AddCheckpointUpload(0.2, true);
  m.AddCheckpointUpload(0.1, false);
  m.AddLeave();
  const std::string t = m.Text();
  EXPECT_THAT(t, HasSubstr("\nlockstep_worker_registered 1\n"));
  EXPECT_THAT(
      t,
      Not(HasSubstr("\nlockstep_worker_last_heartbeat_timestamp_seconds 0\n")));
  EXPECT_THAT(t,
              HasSubstr("lockstep_worker_checkpoint_upload_seconds_count 2"));
  EXPECT_THAT(
      t, HasSubstr("\nlockstep_worker_checkpoint_upload_failures_total 1\n"));
  EXPECT_THAT(t, HasSubstr("\nlockstep_worker_graceful_leaves_total 1\n"));
}

}  // namespace
}  // namespace lockstep
