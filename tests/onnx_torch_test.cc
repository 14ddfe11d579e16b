// Numerical agreement with PyTorch for a model brought as ONNX:
// tests/torch_onnx_reference.py builds a small residual CNN in torch (conv,
// batch norm, ReLU, a residual add, max pool, flatten, two linears), exports
// it with torch.onnx.export (training mode, opset 17) and writes one
// training step's loss, logits and every parameter's gradient on a seeded
// batch. lockstep imports the graph ("model": {"onnx": ...}), its
// initializers as the initial weights, runs one training step and must
// agree in fp32:
//   loss within 1e-6 relative, logits within 1e-5 absolute (they are O(1)),
//   each gradient within 1e-5 of its tensor's largest entry.
// The parameters carry the state dict's names, so the gradients are looked
// up by them. Skips, saying why, where /usr/bin/python3 has no torch.
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/job/job_spec.h"
#include "core/model/model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"
#include "tests/torch_util.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
using testing::MaxAbs;
using testing::MaxDiff;
using testing::NewTempDir;
using testing::ReadTensors;
using testing::Runfile;
using testing::RunProcess;
using testing::TorchMissing;

constexpr int kBatch = 4, kHeight = 8, kWidth = 6, kChannels = 3, kClasses = 5;

// Runs the reference into a fresh folder; its path.
std::string Reference(const std::vector<std::string>& extra) {
  const std::string dir = NewTempDir("onnx_ref");
  std::vector<std::string> argv = {"/usr/bin/python3",
                                   Runfile("tests/torch_onnx_reference.py"),
                                   "--out",
                                   dir,
                                   "--seed",
                                   "5",
                                   "--batch",
                                   std::to_string(kBatch),
                                   "--height",
                                   std::to_string(kHeight),
                                   "--width",
                                   std::to_string(kWidth),
                                   "--channels",
                                   std::to_string(kChannels),
                                   "--classes",
                                   std::to_string(kClasses)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  testing::RunResult ref = RunProcess(argv, dir, 180);
  EXPECT_TRUE(ref.exit.exited && ref.exit.exit_code == 0) << ref.err;
  return dir;
}

TEST(OnnxTorchTest, AnExportedResidualCnnTrainsAsTorchDoes) {
  LOCKSTEP_SKIP_OR_FAIL_IF_MISSING(TorchMissing());
  const std::string dir = Reference({});
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(absl::StrFormat(
      R"({"onnx": "%s/model.onnx", "input": "pixels",
          "output": "logits"})",
      dir));
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::unique_ptr<Model>> built = Model::Build(*spec, 1);
  ASSERT_TRUE(built.ok()) << built.status();
  Model& m = **built;
  EXPECT_THAT(m.graph().import_summary(), HasSubstr("ONNX nodes as"));

  std::map<std::string, Tensor> batch = ReadTensors(dir + "/batch.safetensors");
  std::map<std::string, Tensor> want =
      ReadTensors(dir + "/expected.safetensors");
  const Tensor& x = batch.at("x");
  ASSERT_EQ(x.shape(), (Shape{kBatch, kHeight, kWidth, kChannels}));
  const std::vector<int32_t> labels =
      testing::IntLabels(batch.at("labels"));

  const BatchLoss loss =
      m.TrainStep(x, labels.data(), LossType::kSparseCategoricalCrossentropy,
                  1.0f / kBatch, 0);
  const double torch_loss = want.at("loss").data()[0];
  EXPECT_NEAR(loss.loss_sum / kBatch, torch_loss, 1e-6 * torch_loss);

  int checked = 0;
  double worst = 0;
  std::vector<std::string> names;
  for (Param* p : m.params()) {
    names.push_back(p->name);
    // The running statistics are no gradient in torch (moving averages).
    if (p->name.find(".running_") != std::string::npos) continue;
    auto it = want.find("grad." + p->name);
    ASSERT_NE(it, want.end()) << p->name;
    ASSERT_EQ(it->second.shape(), p->grad.shape()) << p->name;
    const double scale = MaxAbs(it->second.data(), it->second.size());
    const double diff =
        MaxDiff(p->grad.data(), it->second.data(), p->grad.size());
    // A conv's bias before a batch norm is subtracted out again: its
    // gradient is rounding in both.
    if (p->name == "conv1.bias" || p->name == "conv2.bias") {
      EXPECT_LT(scale, 1e-5) << p->name;
      EXPECT_LE(diff, 1e-6) << p->name;
      ++checked;
      continue;
    }
    EXPECT_GT(scale, 1e-4) << p->name << ": a gradient this small tests little";
    EXPECT_LE(diff, 1e-5 * scale) << p->name;
    worst = std::max(worst, diff / scale);
    ++checked;
  }
  // conv1, bn1, conv2, bn2, fc1, fc2: a weight and a bias each.
  EXPECT_EQ(checked, 12) << absl::StrJoin(names, ", ");
  EXPECT_EQ(names.front(), "conv1.weight");
  std::printf(
      "imported residual CNN: loss %.8f (torch %.8f), worst gradient "
      "difference %.2e of its tensor's largest entry\n",
      loss.loss_sum / kBatch, torch_loss, worst);

  // Inference runs the batch norms on their running statistics (the
  // export's initial ones: no optimizer step has moved them).
  const float* logits = m.Logits(x);
  const Tensor& want_logits = want.at("inference_logits");
  ASSERT_EQ(want_logits.size(), kBatch * kClasses);
  EXPECT_LE(MaxDiff(logits, want_logits.data(), want_logits.size()), 1e-5);
}

// The data's sample must hold as many values as the graph's input: the
// error names both and the file.
TEST(OnnxTorchTest, ADataShapeThatDoesNotFitTheGraphIsNamed) {
  LOCKSTEP_SKIP_OR_FAIL_IF_MISSING(TorchMissing());
  const std::string dir = Reference({});
  absl::StatusOr<ModelSpec> spec =
      ParseModelSpec(absl::StrFormat(R"({"onnx": "%s/model.onnx"})", dir));
  ASSERT_TRUE(spec.ok()) << spec.status();
  spec->inputs[0].shape = {28, 28, 1};
  absl::StatusOr<std::unique_ptr<Model>> built = Model::Build(*spec, 1);
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().message(),
            absl::StrCat("model.onnx: \"", dir,
                         "/model.onnx\" takes [8, 6, 3] per sample (144 "
                         "values, channels last) but a data sample is "
                         "[28, 28, 1] (784 values)"));
}

}  // namespace
}  // namespace lockstep
