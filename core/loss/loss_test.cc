#include "core/loss/loss.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

// The job file's three losses, in the order errors list them, each with
// the activation it folds in; an unknown name has none.
TEST(LossRegistryTest, HoldsTheJobFilesLossesInOrder) {
  std::vector<std::string> names;
  for (const Loss* l : Losses()) names.push_back(l->name);
  EXPECT_EQ(names, (std::vector<std::string>{"sparse_categorical_crossentropy",
                                             "mse", "binary_crossentropy"}));
  EXPECT_EQ(FindLoss("hinge"), nullptr);
  EXPECT_EQ(FindLoss("mse"), &LossNamed("mse"));
  EXPECT_EQ(LossNamed("sparse_categorical_crossentropy").fused,
            FusedActivation::kSoftmax);
  EXPECT_EQ(LossNamed("binary_crossentropy").fused, FusedActivation::kSigmoid);
  EXPECT_EQ(LossNamed("mse").fused, FusedActivation::kNone);
  EXPECT_TRUE(
      FusesOutputActivation(LossNamed("binary_crossentropy"), true, true));
  EXPECT_FALSE(
      FusesOutputActivation(LossNamed("binary_crossentropy"), true, false));
  EXPECT_FALSE(FusesOutputActivation(LossNamed("mse"), true, true));
}

// Each loss's numbers on two rows (one unlabelled), and its gradient.
TEST(LossRegistryTest, ComputesLossCountAndGradient) {
  const float out[4] = {2.0f, 0.0f, 5.0f, 5.0f};
  const int32_t labels[2] = {0, -1};
  float grad[4];
  LossSums s = LossNamed("sparse_categorical_crossentropy")
                   .compute(2, 2, out, labels, 1.0f, grad);
  EXPECT_NEAR(s.loss_sum, std::log(1.0 + std::exp(-2.0)), 1e-6);
  EXPECT_EQ(s.correct, 1);
  EXPECT_EQ(s.count, 1);
  EXPECT_NEAR(grad[0], 1.0 / (1.0 + std::exp(-2.0)) - 1.0, 1e-6);
  EXPECT_EQ(grad[2], 0.0f);
  s = LossNamed("mse").compute(2, 2, out, labels, 1.0f, grad);
  EXPECT_NEAR(s.loss_sum, (1.0 + 0.0) / 2, 1e-6);  // (2-1)^2 and (0-0)^2
  EXPECT_NEAR(grad[0], 1.0f, 1e-6);                // 2 (y - t) / 2
  s = LossNamed("binary_crossentropy").compute(2, 1, out, labels, 1.0f, grad);
  EXPECT_NEAR(s.loss_sum, std::log1p(std::exp(-2.0)) + 2.0, 1e-6);
  EXPECT_EQ(s.correct, 0);  // z = 2 says 1, the label 0
}

// Binary cross-entropy's own checks, in the words the trainer reports.
TEST(LossRegistryTest, BinaryCrossentropyChecksClassesAndOutputs) {
  const Loss& bce = LossNamed("binary_crossentropy");
  LossFit f;
  f.model_outputs = 1;
  f.model_labels = 1;
  f.model_shape = "[1]";
  f.classes = 3;
  f.labels = 1;
  f.source = "train.csv";
  EXPECT_EQ(bce.check(f).message(),
            "loss: binary_crossentropy needs two classes (labels 0 and 1), one "
            "per sample; the data (train.csv) has 1 label(s) of 3 classes per "
            "sample");
  f.classes = 2;
  EXPECT_TRUE(bce.check(f).ok());
  f.model_outputs = 2;
  f.model_shape = "[2]";
  EXPECT_EQ(bce.check(f).message(),
            "model: binary_crossentropy reads one logit per sample (a last "
            "dense layer of 1 unit, linear or sigmoid), but the model outputs "
            "[2] per sample");
  EXPECT_EQ(bce.predicted_classes(1), 2);
  double prob[2];
  const float z = 0.0f;
  bce.probabilities(&z, 1, prob);
  EXPECT_DOUBLE_EQ(prob[0], 0.5);
  EXPECT_EQ(LossNamed("mse").check, nullptr);
  LossFit r;
  r.model_outputs = 1;
  r.classes = 5;
  r.labels = 1;
  EXPECT_TRUE(LossNamed("mse").fits(r));  // one regression output
  r.labels = 2;
  EXPECT_FALSE(LossNamed("mse").fits(r));
}

}  // namespace
}  // namespace lockstep
