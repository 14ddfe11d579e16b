// StepMeter: run and window rates, ETA, epoch and summary losses, and the
// divergence check; the epoch-end line and scalars.
#include "core/train/step_meter.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

BatchLoss Loss(double sum, int64_t correct, int64_t count) {
  BatchLoss b;
  b.loss_sum = sum;
  b.correct = correct;
  b.count = count;
  return b;
}

TEST(StepMeterTest, RatesEtaAndLosses) {
  StepMeter m;
  EXPECT_EQ(m.run_rate(), 0);
  EXPECT_EQ(m.Eta(10, 64), -1);
  ASSERT_TRUE(m.Add(1, 0.5, 100, Loss(50, 60, 100)).ok());
  ASSERT_TRUE(m.Add(2, 1.5, 100, Loss(30, 80, 100)).ok());
  EXPECT_DOUBLE_EQ(m.run_rate(), 100.0);  // 200 samples in 2 s
  EXPECT_DOUBLE_EQ(m.Eta(3, 50), 1.5);    // 150 samples at 100/s
  EXPECT_DOUBLE_EQ(m.TakeWindowRate(), 100.0);
  ASSERT_TRUE(m.Add(3, 0.25, 100, Loss(20, 90, 100)).ok());
  EXPECT_DOUBLE_EQ(m.TakeWindowRate(), 400.0);  // only the last step
  EXPECT_DOUBLE_EQ(m.epoch().mean_loss(), 100.0 / 300);
  EXPECT_DOUBLE_EQ(m.TakeSummary().accuracy(), 230.0 / 300);
  EXPECT_EQ(m.TakeSummary().count, 0);  // taken
  m.EndEpoch();
  EXPECT_EQ(m.epoch().count, 0);
  EXPECT_DOUBLE_EQ(m.run_rate(), 300 / 2.25);  // the run keeps counting
  // Evaluation and checkpoints between steps: not in the rate, in the ETA
  // (1.5 s over 3 steps: 0.5 s a step still to run).
  m.AddOverhead(1.5);
  EXPECT_DOUBLE_EQ(m.run_rate(), 300 / 2.25);
  EXPECT_DOUBLE_EQ(m.Eta(4, 100), 4 * (100 / (300 / 2.25) + 0.5));
}

TEST(StepMeterTest, NonFiniteLossIsDivergenceNamingTheStep) {
  StepMeter m;
  absl::Status s =
      m.Add(17, 0.1, 10, Loss(std::numeric_limits<double>::quiet_NaN(), 0, 10));
  EXPECT_TRUE(absl::IsFailedPrecondition(s));
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("training diverged at step 17"));
  EXPECT_EQ(m.epoch().count, 0);  // nothing recorded
}

TEST(StepMeterTest, EpochLineAndScalars) {
  EXPECT_EQ(
      EpochDoneLine("j", 3, Loss(25.1, 99, 100), Loss(38, 985, 1000), 0.3),
      "[j] epoch 3 done  train loss 0.2510  acc 0.9900  |  test loss "
      "0.0380  acc 0.9850  (1000 predictions, eval 0.3s)");
  auto v = EpochScalars(Loss(1, 1, 2), Loss(3, 2, 4));
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0].first, "eval/loss");
  EXPECT_DOUBLE_EQ(v[0].second, 0.75);
  EXPECT_EQ(v[3].first, "epoch/train_accuracy");
  EXPECT_DOUBLE_EQ(v[3].second, 0.5);
}

}  // namespace
}  // namespace lockstep
