// Numerical agreement with PyTorch: tests/torch_bert_reference.py builds a
// BERT masked-LM (Hugging Face BertForMaskedLM's structure and names) in
// torch with seeded weights, writes them as model.safetensors with a batch
// (padding, an unused prediction slot) and its loss, logits and every
// parameter's gradient. lockstep loads the same file as the model's initial
// weights ("init": {"safetensors": ...}) and must agree, in fp32:
//   loss within 1e-5 relative, logits within 1e-4 absolute (they are O(1)),
//   each gradient tensor within 1e-4 of its largest entry (max |ours -
//   torch| <= 1e-4 * max |torch| + 1e-7).
// Skips, saying why, where /usr/bin/python3 has no torch.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/checkpoint/safetensors.h"
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

constexpr int kLength = 10, kPredictions = 3, kBatch = 3, kVocab = 50;

ModelSpec BertSpec(int layers, const std::string& init) {
  absl::StatusOr<ModelSpec> m = ParseModelSpec(absl::StrFormat(
      R"({"inputs": [{"name": "token_ids", "shape": [%d]},
                     {"name": "segment_ids", "shape": [%d]},
                     {"name": "padding_mask", "shape": [%d]},
                     {"name": "mask_positions", "shape": [%d]}],
          "layers": [{"type": "bert_mlm", "name": "bert",
                      "inputs": ["token_ids", "segment_ids", "padding_mask",
                                 "mask_positions"],
                      "vocab_size": %d, "hidden": 16, "layers": %d,
                      "heads": 2, "intermediate": 32, "max_positions": 16,
                      "dropout": 0}],
          "param_names": "torch",
          "init": {"safetensors": "%s"}})",
      kLength, kLength, kLength, kPredictions, kVocab, layers, init));
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : ModelSpec();
}

class BertTorchTest : public ::testing::TestWithParam<int> {};

TEST_P(BertTorchTest, LossLogitsAndEveryGradientAgree) {
  const std::string why = TorchMissing();
  if (!why.empty()) GTEST_SKIP() << why;
  const int layers = GetParam();
  const std::string dir = NewTempDir("bert_ref");
  testing::RunResult ref = RunProcess(
      {"/usr/bin/python3", Runfile("tests/torch_bert_reference.py"), "--out",
       dir, "--layers", std::to_string(layers), "--seed",
       std::to_string(10 + layers), "--vocab", std::to_string(kVocab),
       "--length", std::to_string(kLength), "--predictions",
       std::to_string(kPredictions), "--batch", std::to_string(kBatch),
       // Weights of a trained model's scale: at BERT's 0.02 attention is
       // nearly uniform and the query and key gradients nearly vanish.
       "--std", "0.3"},
      dir, 120);
  ASSERT_TRUE(ref.exit.exited && ref.exit.exit_code == 0) << ref.err;

  absl::StatusOr<std::unique_ptr<Model>> built =
      Model::Build(BertSpec(layers, dir + "/model.safetensors"), 1);
  ASSERT_TRUE(built.ok()) << built.status();
  Model& m = **built;
  // Hugging Face files carry an integer position_ids buffer: not a
  // parameter, left out.
  EXPECT_EQ(m.graph().init_unused(),
            std::vector<std::string>{"bert.embeddings.position_ids"});

  std::map<std::string, Tensor> batch = ReadTensors(dir + "/batch.safetensors");
  std::map<std::string, Tensor> expected = ReadTensors(dir + "/expected.safetensors");
  ASSERT_EQ(batch.count("label_values"), 1u);
  // A sample is its inputs' values one after another.
  const int per = 3 * kLength + kPredictions;
  Tensor x({kBatch, per});
  for (int s = 0; s < kBatch; ++s) {
    float* row = x.data() + s * per;
    int at = 0;
    for (const char* field :
         {"token_ids", "segment_ids", "padding_mask", "mask_positions"}) {
      const Tensor& t = batch.at(field);
      const int64_t w = t.shape()[1];
      std::copy(t.data() + s * w, t.data() + (s + 1) * w, row + at);
      at += static_cast<int>(w);
    }
  }
  std::vector<int32_t> labels;
  int count = 0;
  for (float v : batch.at("label_values").values()) {
    labels.push_back(static_cast<int32_t>(v));
    count += v >= 0;
  }
  ASSERT_EQ(count, kBatch * kPredictions - 1);  // one unused slot

  // The reference's loss is the mean over labelled slots: scale by 1/count.
  BatchLoss loss =
      m.TrainStep(x, labels.data(), LossType::kSparseCategoricalCrossentropy,
                  1.0f / count, 0);
  EXPECT_EQ(loss.count, count);
  const double torch_loss = expected.at("loss").data()[0];
  EXPECT_NEAR(loss.loss_sum / count, torch_loss, 1e-5 * torch_loss);

  int checked = 0;
  double worst = 0;
  for (Param* p : m.params()) {
    auto it = expected.find("grad." + p->name);
    ASSERT_NE(it, expected.end()) << p->name;
    ASSERT_EQ(it->second.shape(), p->grad.shape()) << p->name;
    // The key bias's gradient is zero in exact arithmetic (a softmax does
    // not see a shift shared by every key): rounding noise on both sides,
    // hence the absolute floor of 1e-7.
    const double scale = MaxAbs(it->second.data(), it->second.size());
    EXPECT_LE(MaxDiff(p->grad.data(), it->second.data(), p->grad.size()),
              1e-4 * scale + 1e-7)
        << p->name;
    if (p->name.find("key.bias") == std::string::npos) {
      EXPECT_GT(scale, 1e-4) << p->name;
      worst = std::max(
          worst,
          MaxDiff(p->grad.data(), it->second.data(), p->grad.size()) / scale);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 16 * layers + 10);  // every parameter (decoder tied)
  std::printf(
      "%d layers: loss %.8f (torch %.8f), worst gradient difference "
      "%.2e of its tensor's largest entry\n",
      layers, loss.loss_sum / count, torch_loss, worst);

  const float* logits = m.Predict(x);
  const Tensor& want = expected.at("logits");
  ASSERT_EQ(want.size(), kBatch * kPredictions * kVocab);
  EXPECT_LE(MaxDiff(logits, want.data(), want.size()), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Layers, BertTorchTest, ::testing::Values(1, 2));

}  // namespace
}  // namespace lockstep
