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
#include <algorithm>
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

// One exported model: its size, batch and the tolerances its depth needs.
struct Case {
  std::string model;  // torch_onnx_reference.py --model
  int batch, height, width, channels, classes;
  double grad_tolerance;   // of each gradient tensor's largest entry
  double logit_tolerance;  // absolute
  int trained;             // parameters torch gives a gradient
  // Biases right before a batch norm: subtracted out again, their gradient
  // is rounding in both (checked to be, not compared).
  std::vector<std::string> cancelled;
};

// Runs the reference into a fresh folder; its path.
std::string Reference(const Case& c) {
  const std::string dir = NewTempDir("onnx_ref");
  const std::vector<std::string> argv = {
      "/usr/bin/python3",
      Runfile("tests/torch_onnx_reference.py"),
      "--out",
      dir,
      "--seed",
      "5",
      "--model",
      c.model,
      "--batch",
      std::to_string(c.batch),
      "--height",
      std::to_string(c.height),
      "--width",
      std::to_string(c.width),
      "--channels",
      std::to_string(c.channels),
      "--classes",
      std::to_string(c.classes)};
  testing::RunResult ref = RunProcess(argv, dir, 300);
  EXPECT_TRUE(ref.exit.exited && ref.exit.exit_code == 0) << ref.err;
  return dir;
}

// The small residual CNN: fp32 agreement as tight as the native layers'.
Case ResidualCnn() {
  return Case{"residual_cnn",
              4,
              8,
              6,
              3,
              5,
              1e-5,
              1e-5,
              12,
              {"conv1.bias", "conv2.bias"}};
}

class OnnxTorchTest : public ::testing::TestWithParam<Case> {};

TEST_P(OnnxTorchTest, OneTrainingStepAgreesWithTorch) {
  LOCKSTEP_SKIP_OR_FAIL_IF_MISSING(TorchMissing());
  const Case& c = GetParam();
  const std::string dir = Reference(c);
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(absl::StrFormat(
      R"({"onnx": "%s/model.onnx", "input": "pixels", "output": "logits"})",
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
  ASSERT_EQ(x.shape(), (Shape{c.batch, c.height, c.width, c.channels}));
  const std::vector<int32_t> labels = testing::IntLabels(batch.at("labels"));

  const BatchLoss loss = m.TrainStep(
      x, labels.data(), LossNamed("sparse_categorical_crossentropy"),
      1.0f / c.batch, 0);
  const double torch_loss = want.at("loss").data()[0];
  EXPECT_NEAR(loss.loss_sum / c.batch, torch_loss, 1e-5 * torch_loss);

  int checked = 0;
  double worst = 0;
  std::string worst_name;
  for (Param* p : m.params()) {
    // The running statistics are no gradient in torch (moving averages).
    if (p->name.find(".running_") != std::string::npos) continue;
    auto it = want.find("grad64." + p->name);
    ASSERT_NE(it, want.end()) << p->name;
    ASSERT_EQ(it->second.shape(), p->grad.shape()) << p->name;
    const double scale = MaxAbs(it->second.data(), it->second.size());
    const double diff =
        MaxDiff(p->grad.data(), it->second.data(), p->grad.size());
    const double torch_error = want.at("torch_fp32_error." + p->name).data()[0];
    ++checked;
    if (std::find(c.cancelled.begin(), c.cancelled.end(), p->name) !=
        c.cancelled.end()) {
      EXPECT_LT(scale, 1e-5) << p->name;
      EXPECT_LE(diff, 1e-6) << p->name;
      continue;
    }
    // fp32 rounding, amplified through the batch norms of a deep net: as
    // far off as 4x torch's own fp32 step, or the case's fraction of the
    // largest entry, whichever is more.
    const double bound = std::max(c.grad_tolerance * scale, 4 * torch_error);
    EXPECT_LE(diff, bound) << p->name << ": largest " << scale
                           << ", torch's fp32 is off by " << torch_error;
    if (diff / bound > worst) worst = diff / bound, worst_name = p->name;
  }
  EXPECT_EQ(checked, c.trained);
  std::printf(
      "imported %s: loss %.8f (torch %.8f), %d gradients against "
      "torch's float64 step, the nearest its bound at %.2f of it "
      "(%s)\n",
      c.model.c_str(), loss.loss_sum / c.batch, torch_loss, checked, worst,
      worst_name.c_str());

  // Inference runs the batch norms on their running statistics (the
  // export's initial ones: no optimizer step has moved them).
  const float* logits = m.Logits(x);
  const Tensor& want_logits = want.at("inference_logits");
  ASSERT_EQ(want_logits.size(), c.batch * c.classes);
  EXPECT_LE(MaxDiff(logits, want_logits.data(), want_logits.size()),
            c.logit_tolerance);
}

// "ops": hand-written torch beyond layers (an RMSNorm written out, a
// softmax along the middle axis, Concat, ReduceSum, ReduceMean, Trilu,
// LogSoftmax) as op nodes, within 1e-5 as the small CNN; "branches":
// feature maps split, sliced and concatenated along their channels, and
// average pools with padding counted and not.
// torchvision's resnet18 (padded max pool, 1x1 downsampling, 20 batch
// norms) at 64x64 and mobilenet_v2 (depthwise, ReLU6 as Clip, 52 batch
// norms) at 96x96 (its last stages normalize 4 * 3 * 3 values a channel;
// at 64x64, 4 * 2 * 2, one gradient of 158 came to 1.3x its bound).
INSTANTIATE_TEST_SUITE_P(
    Models, OnnxTorchTest,
    ::testing::Values(
        ResidualCnn(), Case{"ops", 4, 8, 6, 3, 5, 1e-5, 1e-5, 5, {}},
        Case{"branches", 4, 8, 6, 3, 5, 1e-5, 1e-5, 8, {}},
        Case{"resnet18", 4, 64, 64, 3, 10, 1e-4, 1e-4, 62, {}},
        Case{"mobilenet_v2", 4, 96, 96, 3, 10, 1e-4, 1e-4, 158, {}},
        Case{"mobilenet_v3_small", 4, 96, 96, 3, 10, 1e-4, 1e-4, 142, {}}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return info.param.model;
    });

// A text model's gradients against the reference's float64 step: each
// within max(1e-4 of its tensor's largest entry, 4x torch's own fp32
// error), and not vanishing (largest entry > 1e-4); a parameter whose name
// contains `zero_in_exact` (non-empty) has a gradient that is zero in exact
// arithmetic: within 1e-6 instead. Returns how many were checked; *worst
// the largest fraction of its bound (of the others), *worst_name whose.
int CheckTextGradients(Model& m, const std::map<std::string, Tensor>& want,
                       const std::string& zero_in_exact, double* worst,
                       std::string* worst_name) {
  int checked = 0;
  for (Param* p : m.params()) {
    auto it = want.find("grad64." + p->name);
    if (it == want.end() || it->second.shape() != p->grad.shape()) {
      ADD_FAILURE() << p->name << ": no gradient of its shape";
      continue;
    }
    const double scale = MaxAbs(it->second.data(), it->second.size());
    const double diff =
        MaxDiff(p->grad.data(), it->second.data(), p->grad.size());
    const double torch_error = want.at("torch_fp32_error." + p->name).data()[0];
    const bool zero = !zero_in_exact.empty() &&
                      p->name.find(zero_in_exact) != std::string::npos;
    const double bound = zero ? 1e-6 : std::max(1e-4 * scale, 4 * torch_error);
    EXPECT_LE(diff, bound) << p->name << ": largest " << scale;
    if (!zero) {
      EXPECT_GT(scale, 1e-4) << p->name;
      if (diff / bound > *worst) *worst = diff / bound, *worst_name = p->name;
    }
    ++checked;
  }
  return checked;
}

// The BERT masked language model of benchmarks/torch_bert.py exported with
// its four text inputs (tests/torch_onnx_text_reference.py): op-level nodes
// (MatMul of activations, Reshape/Transpose, Div, Erf, Softmax, the mask's
// Unsqueeze/Sub/Mul, GatherElements of the masked positions), its shape
// sub-graphs folded at import, Linears as dense layers, the decoder tied to
// the word embeddings. One training step against torch's float64 step: loss
// within 1e-5 relative, each gradient within max(1e-4 of its tensor's
// largest entry, 4x torch's own fp32 error).
TEST(OnnxBertTest, OneTrainingStepAgreesWithTorch) {
  LOCKSTEP_SKIP_OR_FAIL_IF_MISSING(TorchMissing());
  constexpr int kBatch = 3, kLength = 10, kPredictions = 3, kVocab = 50;
  const std::string dir = NewTempDir("onnx_bert_ref");
  testing::RunResult ref = RunProcess(
      {"/usr/bin/python3", Runfile("tests/torch_onnx_text_reference.py"),
       "--out", dir, "--model", "bert", "--seed", "3"},
      dir, 300);
  ASSERT_TRUE(ref.exit.exited && ref.exit.exit_code == 0) << ref.err;
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(absl::StrFormat(
      R"({"onnx": "%s/model.onnx", "input": ["token_ids", "segment_ids",
          "padding_mask", "mask_positions"]})",
      dir));
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::unique_ptr<Model>> built = Model::Build(*spec, 1);
  ASSERT_TRUE(built.ok()) << built.status();
  Model& m = **built;
  std::printf("%s\n", m.graph().import_summary().c_str());
  // The graph's inputs are the model's, in order, named as the data's.
  ASSERT_EQ(m.graph().num_inputs(), 4);
  EXPECT_EQ(m.graph().node(0).name, "token_ids");
  EXPECT_EQ(m.graph().node(3).name, "mask_positions");

  std::map<std::string, Tensor> in = ReadTensors(dir + "/batch.safetensors");
  std::map<std::string, Tensor> want =
      ReadTensors(dir + "/expected.safetensors");
  const int per = 3 * kLength + kPredictions;
  Tensor x({kBatch, per});
  for (int s = 0; s < kBatch; ++s) {
    int at = 0;
    for (const char* field :
         {"token_ids", "segment_ids", "padding_mask", "mask_positions"}) {
      const Tensor& t = in.at(field);
      const int64_t w = t.shape()[1];
      std::copy(t.data() + s * w, t.data() + (s + 1) * w,
                x.data() + s * per + at);
      at += static_cast<int>(w);
    }
  }
  const std::vector<int32_t> labels = testing::IntLabels(in.at("labels"));
  const int used = static_cast<int>(std::count_if(
      labels.begin(), labels.end(), [](int v) { return v >= 0; }));
  ASSERT_EQ(used, kBatch * kPredictions - 1);
  const BatchLoss loss =
      m.TrainStep(x, labels.data(),
                  LossNamed("sparse_categorical_crossentropy"), 1.0f / used, 0);
  EXPECT_EQ(loss.count, used);
  const double torch_loss = want.at("loss").data()[0];
  EXPECT_NEAR(loss.loss_sum / used, torch_loss, 1e-5 * torch_loss);

  double worst = 0;
  std::string worst_name;
  // The key bias's gradient is zero in exact arithmetic (a softmax does not
  // see a shift every key shares): rounding on both sides.
  const int checked =
      CheckTextGradients(m, want, "key.bias", &worst, &worst_name);
  // Every parameter of the 2-layer model (16 a layer, 10 besides; the
  // decoder's weight is the word embeddings').
  EXPECT_EQ(checked, 16 * 2 + 10);
  std::printf(
      "imported bert: loss %.8f (torch %.8f), %d gradients against torch's "
      "float64 step, the nearest its bound at %.2f of it (%s)\n",
      loss.loss_sum / used, torch_loss, checked, worst, worst_name.c_str());

  // Without model.input the graph's four inputs are not fed: the error
  // lists them as the field wants them.
  absl::StatusOr<ModelSpec> unnamed =
      ParseModelSpec(absl::StrFormat(R"({"onnx": "%s/model.onnx"})", dir));
  ASSERT_TRUE(unnamed.ok()) << unnamed.status();
  absl::StatusOr<std::unique_ptr<Model>> refused = Model::Build(*unnamed, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "model.onnx: the graph has 4 inputs (token_ids, segment_ids, "
            "padding_mask, mask_positions); list those the data feeds in "
            "model.input, each fed by the data field of its name: "
            "[\"token_ids\", \"segment_ids\", \"padding_mask\", "
            "\"mask_positions\"]");

  // Inference (no dropout in this export): the logits of the used slots.
  const float* logits = m.Logits(x);
  const Tensor& want_logits = want.at("logits");
  ASSERT_EQ(want_logits.size(), kBatch * kPredictions * kVocab);
  EXPECT_LE(MaxDiff(logits, want_logits.data(), want_logits.size()), 1e-4);
}

// A 2-layer GPT-style causal language model as nanoGPT writes one
// (tests/torch_onnx_text_reference.py --model gpt): the fused q/k/v linear
// split in three (Split), the causal mask a buffer sliced and applied with
// masked_fill (Slice, Equal folded; Where on the scores), the head tied to
// the token embedding. One training step, each position's label the next
// token, against torch's float64 step: loss within 1e-5 relative, each
// gradient within max(1e-4 of its largest entry, 4x torch's fp32 error).
TEST(OnnxGptTest, OneTrainingStepAgreesWithTorch) {
  LOCKSTEP_SKIP_OR_FAIL_IF_MISSING(TorchMissing());
  constexpr int kBatch = 3, kLength = 10, kVocab = 50;
  const std::string dir = NewTempDir("onnx_gpt_ref");
  testing::RunResult ref = RunProcess(
      {"/usr/bin/python3", Runfile("tests/torch_onnx_text_reference.py"),
       "--out", dir, "--model", "gpt", "--seed", "3", "--batch",
       std::to_string(kBatch), "--length", std::to_string(kLength), "--vocab",
       std::to_string(kVocab)},
      dir, 300);
  ASSERT_TRUE(ref.exit.exited && ref.exit.exit_code == 0) << ref.err;
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(absl::StrFormat(
      R"({"onnx": "%s/model.onnx", "input": ["token_ids"]})", dir));
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::unique_ptr<Model>> built = Model::Build(*spec, 1);
  ASSERT_TRUE(built.ok()) << built.status();
  Model& m = **built;
  std::printf("%s\n", m.graph().import_summary().c_str());

  std::map<std::string, Tensor> in = ReadTensors(dir + "/batch.safetensors");
  std::map<std::string, Tensor> want =
      ReadTensors(dir + "/expected.safetensors");
  const Tensor& x = in.at("token_ids");
  ASSERT_EQ(x.shape(), (Shape{kBatch, kLength}));
  const std::vector<int32_t> labels = testing::IntLabels(in.at("labels"));
  const int used = kBatch * (kLength - 1);
  const BatchLoss loss =
      m.TrainStep(x, labels.data(),
                  LossNamed("sparse_categorical_crossentropy"), 1.0f / used, 0);
  EXPECT_EQ(loss.count, used);
  const double torch_loss = want.at("loss").data()[0];
  EXPECT_NEAR(loss.loss_sum / used, torch_loss, 1e-5 * torch_loss);

  double worst = 0;
  std::string worst_name;
  const int checked = CheckTextGradients(m, want, "", &worst, &worst_name);
  // wte, wpe, 12 a block, ln_f's 2 (the head is wte).
  EXPECT_EQ(checked, 2 + 12 * 2 + 2);
  std::printf(
      "imported gpt: loss %.8f (torch %.8f), %d gradients against torch's "
      "float64 step, the nearest its bound at %.2f of it (%s)\n",
      loss.loss_sum / used, torch_loss, checked, worst, worst_name.c_str());
  const float* logits = m.Logits(x);
  const Tensor& want_logits = want.at("logits");
  ASSERT_EQ(want_logits.size(), kBatch * kLength * kVocab);
  EXPECT_LE(MaxDiff(logits, want_logits.data(), want_logits.size()), 1e-4);
}

// The data's sample must hold as many values as the graph's input: the
// error names both and the file.
TEST(OnnxShapeTest, ADataShapeThatDoesNotFitTheGraphIsNamed) {
  LOCKSTEP_SKIP_OR_FAIL_IF_MISSING(TorchMissing());
  const std::string dir = Reference(ResidualCnn());
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
