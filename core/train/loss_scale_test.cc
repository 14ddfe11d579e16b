// Dynamic loss scaling's rule (GradScaler's: back off by half on an
// overflow and skip the step, double after 2000 applied steps in a row) and
// its checkpointed state.
#include "core/train/loss_scale.h"

#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(LossScaleTest, DisabledScalesByOneAndAppliesEveryStep) {
  LossScale off;
  EXPECT_FALSE(off.enabled());
  EXPECT_EQ(off.scale(), 1.0);
  EXPECT_EQ(off.unscale(), 1.0f);
  EXPECT_TRUE(off.Update(false));  // not finite: no scale to blame
  EXPECT_EQ(off.state().scale, 0.0);
  EXPECT_EQ(off.state().skipped_steps, 0);
}

TEST(LossScaleTest, AnOverflowSkipsTheStepAndHalvesTheScale) {
  LossScale ls(true);
  EXPECT_EQ(ls.scale(), 65536.0);
  EXPECT_EQ(ls.unscale(), 1.0f / 65536.0f);
  EXPECT_TRUE(ls.Update(true));
  EXPECT_EQ(ls.state().good_steps, 1);
  EXPECT_FALSE(ls.Update(false));
  EXPECT_EQ(ls.scale(), 32768.0);
  EXPECT_EQ(ls.state().good_steps, 0);  // the run of good steps restarts
  EXPECT_EQ(ls.state().skipped_steps, 1);
  EXPECT_FALSE(ls.Update(false));
  EXPECT_EQ(ls.scale(), 16384.0);
  EXPECT_EQ(ls.state().skipped_steps, 2);
}

TEST(LossScaleTest, GrowsAfterTheIntervalOfAppliedSteps) {
  LossScale ls(true);
  for (int64_t i = 1; i < LossScale::kGrowthInterval; ++i) {
    ASSERT_TRUE(ls.Update(true));
  }
  EXPECT_EQ(ls.scale(), 65536.0);
  EXPECT_EQ(ls.state().good_steps, LossScale::kGrowthInterval - 1);
  EXPECT_TRUE(ls.Update(true));
  EXPECT_EQ(ls.scale(), 131072.0);
  EXPECT_EQ(ls.state().good_steps, 0);
  // An overflow one step short of the next growth starts the count again.
  for (int64_t i = 1; i < LossScale::kGrowthInterval; ++i) ls.Update(true);
  EXPECT_FALSE(ls.Update(false));
  EXPECT_EQ(ls.scale(), 65536.0);
  for (int64_t i = 1; i < LossScale::kGrowthInterval; ++i) ls.Update(true);
  EXPECT_EQ(ls.scale(), 65536.0);
}

TEST(LossScaleTest, BacksOffNoFurtherThanTheFloor) {
  LossScale ls(true);
  for (int i = 0; i < 100; ++i) ls.Update(false);
  EXPECT_EQ(ls.scale(), LossScale::kMinScale);
  EXPECT_EQ(ls.state().skipped_steps, 100);
  EXPECT_EQ(ls.unscale(), 16777216.0f);  // still a power of two
}

TEST(LossScaleTest, RestoresACheckpointsStateOrStartsAfresh) {
  LossScale ls(true);
  LossScaleState saved;
  saved.scale = 1024;
  saved.good_steps = 17;
  saved.skipped_steps = 6;
  ls.Restore(saved);
  EXPECT_TRUE(ls.state() == saved);
  EXPECT_EQ(ls.scale(), 1024.0);
  ls.Restore(LossScaleState{});  // a checkpoint of an fp32 or bf16 run
  EXPECT_EQ(ls.scale(), LossScale::kInitialScale);
  EXPECT_EQ(ls.state().good_steps, 0);
  EXPECT_EQ(ls.state().skipped_steps, 0);
}

}  // namespace
}  // namespace lockstep
