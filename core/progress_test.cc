// The progress line format users and scripts read.
#include "core/progress.h"

#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(ProgressTest, FormatsEveryField) {
  ProgressInfo p;
  p.job = "mnist";
  p.epoch = 1;
  p.epochs = 3;
  p.step = 400;
  p.total_steps = 2814;
  p.loss = 0.22154;
  p.accuracy = 0.93341;
  p.learning_rate = 0.001;
  p.samples_per_sec = 9812.4;
  p.eta_seconds = 3725;
  EXPECT_EQ(FormatProgress(p),
            "[mnist] epoch 1/3  step 400/2814  loss 0.2215  acc 0.9334  "
            "lr 1.0e-03  9,812 samples/s  ETA 1:02:05");
  p.epochs = 0;
  p.eta_seconds = -1;
  EXPECT_EQ(FormatProgress(p),
            "[mnist] step 400/2814  loss 0.2215  acc 0.9334  lr 1.0e-03  "
            "9,812 samples/s  ETA ?");
  p.loss_scale = 32768;  // precision fp16
  p.skipped_steps = 3;
  EXPECT_EQ(FormatProgress(p),
            "[mnist] step 400/2814  loss 0.2215  acc 0.9334  lr 1.0e-03  "
            "scale 32768 (3 skipped)  9,812 samples/s  ETA ?");
}

TEST(ProgressTest, Numbers) {
  EXPECT_EQ(FormatThousands(0), "0");
  EXPECT_EQ(FormatThousands(999.6), "1,000");
  EXPECT_EQ(FormatThousands(1234567), "1,234,567");
  EXPECT_EQ(FormatThousands(-1234), "-1,234");
  EXPECT_EQ(FormatDuration(0), "0:00:00");
  EXPECT_EQ(FormatDuration(59.6), "0:01:00");
  EXPECT_EQ(FormatDuration(-3), "?");
}

}  // namespace
}  // namespace lockstep
