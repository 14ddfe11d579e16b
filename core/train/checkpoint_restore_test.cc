// Restoring optimizer state: a parameter the checkpoint has no state for
// (frozen when it was written) starts at zero and is named; another
// optimizer, a partly missing state or another shape is an error.
#include "core/train/checkpoint_restore.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

Param MakeParam(const std::string& name, float v) {
  Param p;
  p.name = name;
  p.value = Tensor({2}, {v, v});
  p.grad = Tensor({2});
  return p;
}

LoadedCheckpoint Checkpoint(
    const std::vector<std::pair<std::string, Tensor>>& optimizer) {
  LoadedCheckpoint c;
  c.path = "/ckpt/step-00000010";
  c.model = {{"a/kernel", Tensor({2}, {1, 2})}, {"b/kernel", Tensor({2}, {3, 4})}};
  c.optimizer = optimizer;
  c.state.optimizer_iterations = 10;
  return c;
}

std::unique_ptr<Optimizer> Adam(std::vector<Param*> params) {
  OptimizerSpec spec;
  spec.type = OptimizerType::kAdam;
  return *Optimizer::Create(spec, params);
}

TEST(CheckpointRestoreTest, StateOfAFormerlyFrozenParamStartsAtZero) {
  Param a = MakeParam("a/kernel", 0), b = MakeParam("b/kernel", 0);
  std::unique_ptr<Optimizer> opt = Adam({&a, &b});
  // Written while a was frozen: Adam state for b only.
  const LoadedCheckpoint c = Checkpoint(
      {{"adam/m/b/kernel", Tensor({2}, {0.5f, 0.5f})},
       {"adam/v/b/kernel", Tensor({2}, {0.25f, 0.25f})}});
  std::vector<std::string> fresh;
  ASSERT_TRUE(ApplyCheckpoint(c, {&a, &b}, *opt, &fresh).ok());
  EXPECT_EQ(fresh, std::vector<std::string>{"a/kernel"});
  EXPECT_EQ(a.value.values(), (std::vector<float>{1, 2}));
  EXPECT_EQ(opt->iterations(), 10);
  for (const auto& [name, t] : opt->StateTensors()) {
    const float want = name == "adam/m/b/kernel"   ? 0.5f
                       : name == "adam/v/b/kernel" ? 0.25f
                                                   : 0.0f;
    EXPECT_EQ(t->values(), std::vector<float>(2, want)) << name;
  }
  EXPECT_EQ(FreshStateNote(fresh),
            "optimizer state starts at zero for 1 parameters the checkpoint "
            "has none for (frozen when it was written?): a/kernel");
}

TEST(CheckpointRestoreTest, AnotherOptimizerOrAPartOrAShapeIsAnError) {
  Param a = MakeParam("a/kernel", 0), b = MakeParam("b/kernel", 0);
  std::unique_ptr<Optimizer> opt = Adam({&a, &b});
  // Written by SGD with momentum: no Adam state at all.
  absl::Status other = ApplyCheckpoint(
      Checkpoint({{"sgd/momentum/a/kernel", Tensor({2})},
                  {"sgd/momentum/b/kernel", Tensor({2})}}),
      {&a, &b}, *opt);
  EXPECT_EQ(other.message(),
            "checkpoint /ckpt/step-00000010: optimizer state adam/m/a/kernel "
            "is missing, and so is every other (was the optimizer changed?)");
  absl::Status part = ApplyCheckpoint(
      Checkpoint({{"adam/m/a/kernel", Tensor({2})},
                  {"adam/m/b/kernel", Tensor({2})},
                  {"adam/v/b/kernel", Tensor({2})}}),
      {&a, &b}, *opt);
  EXPECT_EQ(part.message(),
            "checkpoint /ckpt/step-00000010: the optimizer state of a/kernel "
            "is partly missing (was the optimizer changed?)");
  absl::Status shape = ApplyCheckpoint(
      Checkpoint({{"adam/m/a/kernel", Tensor({3})}}), {&a, &b}, *opt);
  EXPECT_EQ(shape.message(),
            "checkpoint /ckpt/step-00000010: optimizer state adam/m/a/kernel "
            "is [3], the optimizer's [2]");
}

}  // namespace
}  // namespace lockstep
