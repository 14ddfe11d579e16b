// lockstep's mobilenet_v2 against torchvision's (tests/
// torch_mobilenet_reference.py): torchvision builds mobilenet_v2 with seeded
// weights and non-trivial batch-norm statistics and writes its state dict
// (torchvision's names, PyTorch layouts, the I64 num_batches_tracked
// counters included) as safetensors. lockstep loads it as the model's
// initial weights (model.param_names "torch") and must agree in fp32 on:
//   - inference logits (running statistics): within 2e-5 of the largest;
//   - one training step (batch statistics) against torch's float64 step
//     from the same weights: the mean loss within 1e-5 relative, and each
//     parameter's gradient within 1e-4 of its tensor's largest entry or 4x
//     torch's own fp32 error, whichever is more;
//   - the running statistics after that step (PyTorch's momentum 0.1, the
//     unbiased batch variance): within 1e-5 of max(1, the largest);
//   - and back: lockstep's checkpoint (model.safetensors) loads into
//     torchvision with every key matched but the counters, and torch's
//     inference logits from it equal lockstep's within 2e-5.
// Skips, saying why, where /usr/bin/python3 has no torch or torchvision.
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/checkpoint/checkpoint.h"
#include "core/job/job_spec.h"
#include "core/model/model.h"
#include "core/train/optimizer.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"
#include "tests/torch_util.h"

namespace lockstep {
namespace {

using testing::MaxAbs;
using testing::MaxDiff;
using testing::NewTempDir;
using testing::ReadTensors;
using testing::Runfile;
using testing::RunProcess;
using testing::TorchMissing;

std::string TorchvisionMissing() {
  const std::string why = TorchMissing();
  if (!why.empty()) return why;
  const std::string dir = NewTempDir("torchvision_probe");
  testing::RunResult r = RunProcess(
      {"/usr/bin/python3", "-c", "import torchvision"}, dir, 60);
  if (r.exit.exited && r.exit.exit_code == 0) return "";
  return "python3-torchvision is not installed for /usr/bin/python3 "
         "(scripts/install_deps.sh installs it)";
}

struct Case {
  double alpha;
  int size;
  int batch;
  // include_top false under a fine-tuning head (global average pooling and
  // a dense "fc"), as examples/mobilenet_finetune.json builds it.
  bool head = false;
};

class MobileNetTorchTest : public ::testing::TestWithParam<Case> {};

constexpr int kClasses = 10;

TEST_P(MobileNetTorchTest, InferenceTrainingStepStatisticsAndCheckpoint) {
  LOCKSTEP_SKIP_OR_FAIL_IF_MISSING(TorchvisionMissing());
  const Case c = GetParam();
  const std::string dir = NewTempDir("mobilenet_ref");
  const std::string script = Runfile("tests/torch_mobilenet_reference.py");
  std::vector<std::string> common = {
      "--alpha", absl::StrFormat("%g", c.alpha), "--classes",
      std::to_string(kClasses)};
  if (c.head) common.push_back("--head");
  std::vector<std::string> argv = {"/usr/bin/python3", script, "--out", dir,
                                   "--size", std::to_string(c.size),
                                   "--batch", std::to_string(c.batch)};
  argv.insert(argv.end(), common.begin(), common.end());
  testing::RunResult ref = RunProcess(argv, dir, 300);
  ASSERT_TRUE(ref.exit.exited && ref.exit.exit_code == 0) << ref.err;

  const std::string layers =
      c.head ? absl::StrFormat(
                   R"({"type": "mobilenet_v2", "alpha": %g,
                       "include_top": false},
                      {"type": "global_average_pooling2d", "name": "pool"},
                      {"type": "dense", "name": "fc", "units": %d})",
                   c.alpha, kClasses)
             : absl::StrFormat(
                   R"({"type": "mobilenet_v2", "alpha": %g, "classes": %d,
                       "dropout": 0})",
                   c.alpha, kClasses);
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(absl::StrFormat(
      R"({"input_shape": [%d, %d, 3],
          "layers": [%s],
          "param_names": "torch",
          "init": {"safetensors": "%s/model.safetensors"}})",
      c.size, c.size, layers, dir));
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::unique_ptr<Model>> built = Model::Build(*spec, 1);
  ASSERT_TRUE(built.ok()) << built.status();
  Model& m = **built;
  // Every parameter and running statistic came from torchvision's file;
  // only the counters were left over.
  for (const std::string& unused : m.graph().init_unused()) {
    EXPECT_NE(unused.find("num_batches_tracked"), std::string::npos)
        << unused;
  }
  EXPECT_EQ(m.params().front()->name, "features.0.0.weight");
  EXPECT_EQ(m.params().back()->name,
            c.head ? "fc.bias" : "classifier.1.bias");

  std::map<std::string, Tensor> batch = ReadTensors(dir + "/batch.safetensors");
  std::map<std::string, Tensor> want =
      ReadTensors(dir + "/expected.safetensors");
  const Tensor& images = batch.at("x");
  ASSERT_EQ(images.shape(), (Shape{c.batch, c.size, c.size, 3}));
  Tensor x = images;
  const std::vector<int32_t> labels =
      testing::IntLabels(batch.at("labels"));

  // 1. Inference.
  const Tensor& eval_logits = want.at("eval_logits");
  ASSERT_EQ(eval_logits.size(), c.batch * kClasses);
  const double logit_scale = MaxAbs(eval_logits.data(), eval_logits.size());
  const double eval_diff =
      MaxDiff(m.Logits(x), eval_logits.data(), eval_logits.size());
  EXPECT_LE(eval_diff, 2e-5 * logit_scale);

  // 2. One training step.
  const BatchLoss loss = m.TrainStep(
      x, labels.data(), LossNamed("sparse_categorical_crossentropy"),
      1.0f / c.batch, 0);
  const double torch_loss = want.at("loss").data()[0];
  EXPECT_NEAR(loss.loss_sum / c.batch, torch_loss, 1e-5 * torch_loss);
  // Against torch's float64 step. A deep net in training mode amplifies
  // rounding, so each gradient may be as far off as 4x torch's own fp32
  // one, or 1e-4 of its largest entry, whichever is more. (At 32x32 the
  // last stages normalize 8 values per channel: torch's fp32 gradients
  // are then off by up to 0.8% of a tensor's largest entry, lockstep's by
  // up to 3.8%; both cases here end at 2x2.) The reference keeps every
  // ReLU6 input clear of the clips, so rounding cannot flip one.
  int grads = 0, stats = 0;
  // The gradient that comes nearest its bound, as a fraction of it. (A
  // projection's batch-norm bias feeding another batch norm has a true
  // gradient of 0: its "largest entry" is rounding, so it is measured
  // against the bound, not against itself.)
  double worst = 0, worst_diff = 0, worst_torch = 0;
  std::string worst_name;
  for (Param* p : m.params()) {
    if (p->update != ParamUpdate::kOptimizer) continue;
    auto it = want.find("grad." + p->name);
    ASSERT_NE(it, want.end()) << p->name;
    ASSERT_EQ(it->second.size(), p->grad.size()) << p->name;
    const double scale = MaxAbs(it->second.data(), it->second.size());
    const double torch_error = want.at("torch_fp32_error." + p->name).data()[0];
    const double diff =
        MaxDiff(p->grad.data(), it->second.data(), p->grad.size());
    const double bound = std::max(1e-4 * scale, 4 * torch_error);
    EXPECT_LE(diff, bound) << p->name << ": largest " << scale
                           << ", torch's fp32 is off by " << torch_error;
    if (diff / bound > worst) {
      worst = diff / bound;
      worst_diff = diff;
      worst_torch = torch_error;
      worst_name = p->name;
    }
    ++grads;
  }
  // 3. The running statistics after the step.
  UpdateMovingAverages(m.params(), c.batch);
  double worst_stat = 0;
  for (Param* p : m.params()) {
    if (p->update != ParamUpdate::kMovingAverage) continue;
    auto it = want.find("after." + p->name);
    ASSERT_NE(it, want.end()) << p->name;
    const double diff =
        MaxDiff(p->value.data(), it->second.data(), p->value.size());
    EXPECT_LE(diff, 1e-5 * std::max(1.0, MaxAbs(it->second.data(),
                                                 it->second.size())))
        << p->name;
    worst_stat = std::max(worst_stat, diff);
    ++stats;
  }
  // torchvision's 52 convolutions and 52 batch norms, and the classifier.
  EXPECT_EQ(stats, 2 * 52);
  EXPECT_EQ(grads, 52 + 2 * 52 + 2);
  std::printf(
      "mobilenet_v2 alpha %g, %dx%d, batch %d: eval logits differ by %.2e "
      "(largest %.3f); loss %.7f (torch %.7f); the gradient nearest its "
      "bound: %s, off by %.2e (torch fp32's: %.2e), %.0f%% of the bound; "
      "running statistics within %.2e\n",
      c.alpha, c.size, c.size, c.batch, eval_diff, logit_scale,
      loss.loss_sum / c.batch, torch_loss, worst_name.c_str(), worst_diff,
      worst_torch, 100 * worst, worst_stat);

  // 4. A lockstep checkpoint back into torchvision.
  CheckpointStore store(dir + "/checkpoints", 1);
  NamedTensors named;
  for (Param* p : m.params()) named.emplace_back(p->name, &p->value);
  CheckpointState state;
  state.step = 1;
  ASSERT_TRUE(store.Commit(state, named, {}).ok());
  const std::string model_file =
      dir + "/checkpoints/" + CheckpointFolderName(1) + "/model.safetensors";
  std::vector<std::string> load = {"/usr/bin/python3", script, "--out", dir,
                                   "--load", model_file, "--batch-file",
                                   dir + "/batch.safetensors"};
  load.insert(load.end(), common.begin(), common.end());
  testing::RunResult back = RunProcess(load, dir, 300);
  ASSERT_TRUE(back.exit.exited && back.exit.exit_code == 0) << back.err;
  std::map<std::string, Tensor> loaded =
      ReadTensors(dir + "/loaded.safetensors");
  EXPECT_EQ(loaded.at("missing").data()[0], 0) << back.err;
  EXPECT_EQ(loaded.at("unexpected").data()[0], 0) << back.err;
  const Tensor& torch_logits = loaded.at("eval_logits");
  ASSERT_EQ(torch_logits.size(), c.batch * kClasses);
  const float* ours = m.Logits(x);
  EXPECT_LE(MaxDiff(ours, torch_logits.data(), torch_logits.size()),
            2e-5 * MaxAbs(torch_logits.data(), torch_logits.size()));
}

INSTANTIATE_TEST_SUITE_P(Sizes, MobileNetTorchTest,
                         // 72 pixels: the stride-2 layers see 9x9 and
                         // 5x5 inputs (odd sizes, "same" padding).
                         ::testing::Values(Case{0.35, 64, 8},
                                           Case{1.0, 64, 4},
                                           Case{0.35, 72, 4, true}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return absl::StrFormat(
                               "alpha%d_size%d%s",
                               static_cast<int>(info.param.alpha * 100),
                               info.param.size,
                               info.param.head ? "_head" : "");
                         });

}  // namespace
}  // namespace lockstep
