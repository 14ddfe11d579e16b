// "precision": "bf16" proved on the MLP and CNN presets' layers (and a
// conv, depthwise conv, dense stack: MobileNetV2's layer kinds) against the
// policy it states, run in torch in float64 (tests/
// torch_bf16_policy_reference.py: every input of a matrix product or
// convolution rounded to bfloat16, forward and backward, everything else
// unrounded): one training step on the same weights and batch, lockstep's
// loss within 1e-6 relative and every gradient tensor within 1e-5 of its
// largest entry (float32 sums of exact products against float64 ones;
// torch's own float32 run of the policy is within 3e-7). lockstep's
// float32 step must be far from it (more than 1e-3 of some tensor's largest
// entry), so a bf16 that rounded nothing cannot pass; and its loss is
// within 1e-3 of torch.autocast's (cpu, bfloat16), which also keeps a
// product's output in bfloat16. Skips, saying why, where /usr/bin/python3
// has no torch.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/job/job_spec.h"
#include "core/model/model.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"
#include "tests/torch_util.h"

namespace lockstep {
namespace {

using testing::IntLabels;
using testing::MaxAbs;
using testing::MaxDiff;
using testing::NewTempDir;
using testing::ReadTensors;
using testing::Runfile;
using testing::RunProcess;
using testing::TorchMissing;

constexpr int kBatch = 16;

std::string Layers(const std::string& model) {
  if (model == "mlp") {
    return R"("input_shape": [8, 8, 1], "layers": [
        {"type": "flatten"},
        {"type": "dense", "name": "fc1", "units": 32, "activation": "relu"},
        {"type": "dense", "name": "fc2", "units": 16, "activation": "relu"},
        {"type": "dense", "name": "fc3", "units": 10}])";
  }
  if (model == "mobile") {  // MobileNetV2's depthwise convolution
    return R"("input_shape": [10, 10, 1], "layers": [
        {"type": "conv2d", "name": "conv", "filters": 4, "kernel_size": 3,
         "activation": "relu"},
        {"type": "depthwise_conv2d", "name": "dw", "kernel_size": 3,
         "activation": "relu"},
        {"type": "flatten"},
        {"type": "dense", "name": "fc", "units": 10}])";
  }
  return R"("input_shape": [12, 12, 1], "layers": [
      {"type": "conv2d", "name": "conv", "filters": 4, "kernel_size": 3,
       "activation": "relu"},
      {"type": "max_pool2d", "pool_size": 2},
      {"type": "flatten"},
      {"type": "dense", "name": "fc1", "units": 16, "activation": "relu"},
      {"type": "dense", "name": "fc2", "units": 10}])";
}

std::unique_ptr<Model> Build(const std::string& model,
                             const std::string& init) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(absl::StrFormat(
      R"({%s, "param_names": "torch", "init": {"safetensors": "%s"}})",
      Layers(model), init));
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (!spec.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<Model>> m = Model::Build(*spec, 1);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

class Bf16PolicyTorchTest : public ::testing::TestWithParam<std::string> {};

TEST_P(Bf16PolicyTorchTest, StepIsThePolicyItStates) {
  LOCKSTEP_SKIP_OR_FAIL_IF_MISSING(TorchMissing());
  const std::string model = GetParam();
  const std::string dir = NewTempDir("bf16_policy_" + model);
  testing::RunResult ref = RunProcess(
      {"/usr/bin/python3", Runfile("tests/torch_bf16_policy_reference.py"),
       "--out", dir, "--model", model, "--batch", std::to_string(kBatch)},
      dir, 120);
  ASSERT_TRUE(ref.exit.exited && ref.exit.exit_code == 0) << ref.err;
  const std::string init = dir + "/model.safetensors";
  std::unique_ptr<Model> bf16 = Build(model, init);
  std::unique_ptr<Model> fp32 = Build(model, init);
  ASSERT_TRUE(bf16 != nullptr && fp32 != nullptr);
  bf16->SetPrecision(GemmPrecision::kBf16);
  std::map<std::string, Tensor> batch = ReadTensors(dir + "/batch.safetensors");
  const std::map<std::string, Tensor> expected =
      ReadTensors(dir + "/expected.safetensors");
  const Tensor& x = batch.at("x");
  const std::vector<int32_t> labels = IntLabels(batch.at("labels"));
  ASSERT_EQ(labels.size(), static_cast<size_t>(kBatch));
  const Loss& xent = LossNamed("sparse_categorical_crossentropy");
  const double loss =
      bf16->TrainStep(x, labels.data(), xent, 1.0f / kBatch, 0).mean_loss();
  const double loss32 =
      fp32->TrainStep(x, labels.data(), xent, 1.0f / kBatch, 0).mean_loss();
  const double want = expected.at("loss").data()[0];
  const double autocast = expected.at("autocast_loss").data()[0];
  EXPECT_NEAR(loss, want, 1e-6 * want);
  EXPECT_NEAR(loss, autocast, 1e-3 * autocast);
  double worst = 0, moved = 0;
  for (size_t i = 0; i < bf16->params().size(); ++i) {
    const Param* p = bf16->params()[i];
    const Tensor& g = expected.at("grad." + p->name);
    ASSERT_EQ(g.shape(), p->grad.shape()) << p->name;
    const double scale = MaxAbs(g.data(), g.size());
    ASSERT_GT(scale, 1e-4) << p->name;
    const double d = MaxDiff(p->grad.data(), g.data(), g.size());
    EXPECT_LE(d, 1e-5 * scale + 1e-8) << p->name;
    worst = std::max(worst, d / scale);
    moved = std::max(
        moved,
        MaxDiff(fp32->params()[i]->grad.data(), g.data(), g.size()) / scale);
  }
  EXPECT_GT(moved, 1e-3);
  std::printf(
      "%s bf16: loss %.8f (the policy in float64 %.8f, torch.autocast %.8f, "
      "float32 %.8f); worst gradient difference %.2e of its tensor's "
      "largest entry (<= 1e-5); float32's gradients %.2e from the policy's\n",
      model.c_str(), loss, want, autocast, loss32, worst, moved);
}

INSTANTIATE_TEST_SUITE_P(Presets, Bf16PolicyTorchTest,
                         ::testing::Values("mlp", "cnn", "mobile"));

}  // namespace
}  // namespace lockstep
