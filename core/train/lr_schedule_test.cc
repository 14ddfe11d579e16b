// Learning-rate schedules: constant, piecewise by epoch and by step,
// polynomial decay, warm-up.
#include "core/train/lr_schedule.h"

#include "gtest/gtest.h"

namespace lockstep {
namespace {

LrSchedule Make(const ScheduleSpec& spec, double base_lr,
                int64_t steps_per_epoch) {
  absl::StatusOr<LrSchedule> s =
      LrSchedule::Create(spec, base_lr, steps_per_epoch);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

TEST(LrScheduleTest, Constant) {
  LrSchedule s = Make(ScheduleSpec(), 0.01, 10);
  EXPECT_EQ(s.At(0), 0.01);
  EXPECT_EQ(s.At(123456), 0.01);
}

TEST(LrScheduleTest, PiecewiseByEpochLikeTheKerasTutorial) {
  // decay(epoch): epoch < 3 -> 1e-3, epoch < 7 -> 1e-4, else 1e-5.
  ScheduleSpec spec;
  spec.type = ScheduleType::kPiecewise;
  spec.unit = ScheduleUnit::kEpoch;
  spec.boundaries = {3, 7};
  spec.values = {1e-3, 1e-4, 1e-5};
  LrSchedule s = Make(spec, 0.5, 100);
  EXPECT_EQ(s.At(0), 1e-3);
  EXPECT_EQ(s.At(299), 1e-3);  // last step of epoch 2
  EXPECT_EQ(s.At(300), 1e-4);  // first step of epoch 3
  EXPECT_EQ(s.At(699), 1e-4);
  EXPECT_EQ(s.At(700), 1e-5);
  EXPECT_EQ(s.At(100000), 1e-5);
}

TEST(LrScheduleTest, PiecewiseByStepLikeKerasPiecewiseConstantDecay) {
  // Keras: step <= 100 -> 1.0, step <= 110 -> 0.5, else 0.1.
  ScheduleSpec spec;
  spec.type = ScheduleType::kPiecewise;
  spec.unit = ScheduleUnit::kStep;
  spec.boundaries = {100, 110};
  spec.values = {1.0, 0.5, 0.1};
  LrSchedule s = Make(spec, 0.5, 0);  // steps per epoch unused
  EXPECT_EQ(s.At(0), 1.0);
  EXPECT_EQ(s.At(100), 1.0);
  EXPECT_EQ(s.At(101), 0.5);
  EXPECT_EQ(s.At(110), 0.5);
  EXPECT_EQ(s.At(111), 0.1);
}

TEST(LrScheduleTest, PolynomialLinear) {
  ScheduleSpec spec;
  spec.type = ScheduleType::kPolynomial;
  spec.decay_steps = 100;
  spec.end_learning_rate = 0.001;
  spec.power = 1.0;
  LrSchedule s = Make(spec, 0.1, 10);
  EXPECT_DOUBLE_EQ(s.At(0), 0.1);
  EXPECT_DOUBLE_EQ(s.At(50), 0.0505);  // (0.1 - 0.001) * 0.5 + 0.001
  EXPECT_DOUBLE_EQ(s.At(100), 0.001);
  EXPECT_DOUBLE_EQ(s.At(1000), 0.001);  // held at the end
}

TEST(LrScheduleTest, PolynomialPower) {
  ScheduleSpec spec;
  spec.type = ScheduleType::kPolynomial;
  spec.decay_steps = 10;
  spec.end_learning_rate = 0.0;
  spec.power = 2.0;
  LrSchedule s = Make(spec, 1.0, 10);
  EXPECT_DOUBLE_EQ(s.At(5), 0.25);
  EXPECT_NEAR(s.At(9), 0.01, 1e-15);
}

TEST(LrScheduleTest, WarmupMultiplies) {
  ScheduleSpec spec;
  spec.warmup_steps = 4;
  LrSchedule s = Make(spec, 0.2, 10);
  EXPECT_DOUBLE_EQ(s.At(0), 0.05);
  EXPECT_DOUBLE_EQ(s.At(1), 0.1);
  EXPECT_DOUBLE_EQ(s.At(2), 0.15);
  EXPECT_DOUBLE_EQ(s.At(3), 0.2);
  EXPECT_DOUBLE_EQ(s.At(50), 0.2);

  spec.type = ScheduleType::kPiecewise;
  spec.unit = ScheduleUnit::kStep;
  spec.boundaries = {1};
  spec.values = {1.0, 0.5};
  LrSchedule p = Make(spec, 0.2, 10);
  EXPECT_DOUBLE_EQ(p.At(0), 0.25);
  EXPECT_DOUBLE_EQ(p.At(2), 0.5 * 0.75);
  EXPECT_DOUBLE_EQ(p.At(3), 0.5);
}

TEST(LrScheduleTest, NegativeStepCountsAsZero) {
  ScheduleSpec spec;
  spec.warmup_steps = 2;
  LrSchedule s = Make(spec, 1.0, 1);
  EXPECT_EQ(s.At(-5), 0.5);
}

TEST(LrScheduleTest, RejectsBadSpecs) {
  ScheduleSpec piecewise;
  piecewise.type = ScheduleType::kPiecewise;
  piecewise.boundaries = {3};
  piecewise.values = {1e-3};
  absl::StatusOr<LrSchedule> s = LrSchedule::Create(piecewise, 1e-3, 10);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(),
            "lr_schedule.values: must have one more entry than boundaries "
            "(2), got 1");

  piecewise.values = {1e-3, 1e-4};
  s = LrSchedule::Create(piecewise, 1e-3, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "lr_schedule.unit: a schedule by epoch needs at least one step "
            "per epoch, got 0");

  ScheduleSpec poly;
  poly.type = ScheduleType::kPolynomial;
  poly.decay_steps = 0;
  s = LrSchedule::Create(poly, 1e-3, 10);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "lr_schedule.decay_steps: must be an integer >= 1, got 0");

  s = LrSchedule::Create(ScheduleSpec(), 0, 10);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "optimizer.learning_rate: must be > 0, got 0");
}

TEST(LrScheduleTest, ScaleWithReplicasMultipliesEveryRate) {
  JobSpec job;
  job.optimizer.learning_rate = 1e-4;
  job.lr_schedule.type = ScheduleType::kPolynomial;
  job.lr_schedule.decay_steps = 100;
  job.lr_schedule.end_learning_rate = 0;
  job.lr_schedule.power = 1;
  job.lr_schedule.warmup_steps = 10;
  job.cluster.workers = 2;
  job.cluster.replicas_per_worker = 3;
  absl::StatusOr<LrSchedule> plain = LrSchedule::ForJob(job, 50);
  ASSERT_TRUE(plain.ok()) << plain.status();
  job.optimizer.scale_with_replicas = true;
  absl::StatusOr<LrSchedule> scaled = LrSchedule::ForJob(job, 50);
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  // Warm-up step 4: 1e-4 * (1 - 4/100) * 5/10; then times 6 replicas.
  EXPECT_NEAR(plain->At(4), 1e-4 * 0.96 * 0.5, 1e-15);
  for (int64_t step : {0, 4, 50, 99, 150}) {
    EXPECT_NEAR(scaled->At(step), 6 * plain->At(step), 1e-15) << step;
  }
}

}  // namespace
}  // namespace lockstep
