// Numerical agreement with PyTorch for an image head:
// tests/torch_image_head_reference.py builds conv2d (3x3, ReLU or ReLU6, with
// weights large enough that ReLU6 clips at 6 too) [-> depthwise_conv2d,
// stride 2 with TensorFlow's asymmetric 'same' padding, ReLU6] -> global
// average pooling -> dense (logits with sparse categorical cross-entropy, or
// one sigmoid unit with binary cross-entropy, the seed's fine-tuning head)
// in torch with seeded weights and a batch, and
// writes the weights (Keras names and layouts), the NHWC batch, the loss,
// the logits and every parameter's gradient. lockstep loads the weights as
// the model's initial values ("init": {"safetensors": ...}), runs one
// training step and must agree in fp32:
//   loss within 1e-6 relative, logits within 1e-5 absolute (they are O(1)),
//   each gradient within 1e-5 of its tensor's largest entry.
// Skips, saying why, where /usr/bin/python3 has no torch.
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

using testing::MaxAbs;
using testing::MaxDiff;
using testing::NewTempDir;
using testing::ReadTensors;
using testing::Runfile;
using testing::RunProcess;
using testing::TorchMissing;

// Height 10: the 8-row conv output gets one row of 'same' padding, after.
constexpr int kBatch = 4, kHeight = 10, kWidth = 7, kChannels = 3,
              kFilters = 6, kClasses = 5;

struct Head {
  std::string activation;  // the conv's
  bool binary;             // 1 sigmoid unit + binary_crossentropy
  bool depthwise = false;  // a depthwise_conv2d after the conv
  bool torch_names = false;  // param_names "torch": PyTorch's layouts
  int groups = 1;            // the conv's
};

class ImageHeadTorchTest : public ::testing::TestWithParam<Head> {};

TEST_P(ImageHeadTorchTest, LossLogitsAndEveryGradientAgree) {
  LOCKSTEP_SKIP_OR_FAIL_IF_MISSING(TorchMissing());
  const std::string activation = GetParam().activation;
  const bool binary = GetParam().binary;
  const bool depthwise = GetParam().depthwise;
  const bool torch_names = GetParam().torch_names;
  const int outputs = binary ? 1 : kClasses;
  const Loss& loss_type = binary ? LossNamed("binary_crossentropy")
                                 : LossNamed("sparse_categorical_crossentropy");
  const std::string dir = NewTempDir("image_head_ref");
  std::vector<std::string> argv = {
      "/usr/bin/python3", Runfile("tests/torch_image_head_reference.py"),
      "--out", dir, "--seed", "3", "--batch", std::to_string(kBatch),
      "--height", std::to_string(kHeight), "--width", std::to_string(kWidth),
      "--channels", std::to_string(kChannels), "--filters",
      std::to_string(kFilters), "--classes", std::to_string(kClasses),
      "--activation", activation, "--loss", binary ? "bce" : "sce",
      "--conv-std", activation == "relu6" ? "2.0" : "0.4"};
  if (depthwise) argv.push_back("--depthwise");
  if (torch_names) argv.insert(argv.end(), {"--names", "torch"});
  argv.insert(argv.end(), {"--groups", std::to_string(GetParam().groups)});
  testing::RunResult ref = RunProcess(argv, dir, 120);
  ASSERT_TRUE(ref.exit.exited && ref.exit.exit_code == 0) << ref.err;

  absl::StatusOr<ModelSpec> spec = ParseModelSpec(absl::StrFormat(
      R"({"input_shape": [%d, %d, %d],
          "layers": [
            {"type": "conv2d", "name": "conv", "filters": %d,
             "kernel_size": 3, "activation": "%s", "groups": %d},%s
            {"type": "global_average_pooling2d", "name": "gap"},
            {"type": "dense", "name": "head", "units": %d,
             "activation": "%s"}],
          "param_names": "%s",
          "init": {"safetensors": "%s/model.safetensors"}})",
      kHeight, kWidth, kChannels, kFilters, activation, GetParam().groups,
      depthwise ? R"(
            {"type": "depthwise_conv2d", "name": "dw", "kernel_size": 3,
             "strides": 2, "padding": "same", "activation": "relu6"},)"
                : "",
      outputs,
      binary ? "sigmoid" : "linear", torch_names ? "torch" : "keras", dir));
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::unique_ptr<Model>> built = Model::Build(*spec, 1);
  ASSERT_TRUE(built.ok()) << built.status();
  Model& m = **built;

  std::map<std::string, Tensor> batch = ReadTensors(dir + "/batch.safetensors");
  std::map<std::string, Tensor> want =
      ReadTensors(dir + "/expected.safetensors");
  EXPECT_GT(want.at("clipped_low").data()[0], 10);
  if (activation == "relu6") {
    EXPECT_GT(want.at("clipped_high").data()[0], 10);
  }
  const Tensor& images = batch.at("x");
  ASSERT_EQ(images.shape(), (Shape{kBatch, kHeight, kWidth, kChannels}));
  Tensor x({kBatch, kHeight, kWidth, kChannels});
  std::copy(images.data(), images.data() + images.size(), x.data());
  const std::vector<int32_t> labels =
      testing::IntLabels(batch.at("labels"));

  const BatchLoss loss =
      m.TrainStep(x, labels.data(), loss_type, 1.0f / kBatch, 0);
  const double torch_loss = want.at("loss").data()[0];
  EXPECT_NEAR(loss.loss_sum / kBatch, torch_loss, 1e-6 * torch_loss);

  int checked = 0;
  double worst = 0;
  for (Param* p : m.params()) {
    auto it = want.find("grad." + p->name);
    ASSERT_NE(it, want.end()) << p->name;
    ASSERT_EQ(it->second.shape(), p->grad.shape()) << p->name;
    const double scale = MaxAbs(it->second.data(), it->second.size());
    const double diff = MaxDiff(p->grad.data(), it->second.data(),
                                p->grad.size());
    EXPECT_GT(scale, 1e-3) << p->name << ": a gradient this small tests little";
    EXPECT_LE(diff, 1e-5 * scale) << p->name;
    worst = std::max(worst, diff / scale);
    ++checked;
  }
  EXPECT_EQ(checked, depthwise ? 6 : 4);
  std::printf("%s%s: loss %.8f (torch %.8f), worst gradient difference "
              "%.2e of its tensor's largest entry\n",
              (activation + (GetParam().groups > 1 ? " (3 groups)" : "") +
               (depthwise ? " + depthwise" : "") +
               (torch_names ? " (torch layout)" : ""))
                  .c_str(),
              binary ? " + sigmoid/BCE" : "",
              loss.loss_sum / kBatch, torch_loss, worst);

  const float* logits = m.Logits(x);
  const Tensor& want_logits = want.at("logits");
  ASSERT_EQ(want_logits.size(), kBatch * outputs);
  EXPECT_LE(MaxDiff(logits, want_logits.data(), want_logits.size()), 1e-5);
  // Predict applies the output's sigmoid (softmax for a linear head: none,
  // so only the binary head is compared).
  if (binary) {
    const float* p = m.Predict(x);
    const Tensor& want_p = want.at("probabilities");
    EXPECT_LE(MaxDiff(p, want_p.data(), want_p.size()), 1e-6);
  }
  // Evaluate reads the same logits: the same loss, and the accuracy of the
  // prediction.
  const BatchLoss eval = m.Evaluate(x, labels.data(), loss_type);
  EXPECT_NEAR(eval.loss_sum / kBatch, torch_loss, 1e-6 * torch_loss);
  EXPECT_EQ(eval.count, kBatch);
}

INSTANTIATE_TEST_SUITE_P(Heads, ImageHeadTorchTest,
                         ::testing::Values(Head{"relu", false},
                                           Head{"relu6", false},
                                           Head{"relu", true},
                                           Head{"relu", true, true},
                                           Head{"relu6", true, true, true},
                                           Head{"relu", false, false, false, 3},
                                           Head{"relu6", true, true, true, 3}),
                         [](const ::testing::TestParamInfo<Head>& info) {
                           return info.param.activation +
                                  (info.param.groups > 1 ? "_groups" : "") +
                                  (info.param.depthwise ? "_depthwise" : "") +
                                  (info.param.torch_names ? "_torch" : "") +
                                  (info.param.binary ? "_sigmoid_bce" : "");
                         });

}  // namespace
}  // namespace lockstep
