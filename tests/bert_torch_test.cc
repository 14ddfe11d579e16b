// Numerical agreement with PyTorch: tests/torch_bert_reference.py builds a
// BERT masked-LM (Hugging Face BertForMaskedLM's structure and names) in
// torch with seeded weights, writes them as model.safetensors with a batch
// (padding, an unused prediction slot) and its loss, logits and every
// parameter's gradient. lockstep loads the same file as the model's initial
// weights ("init": {"safetensors": ...}) and must agree, in fp32:
//   loss within 1e-5 relative, logits within 1e-4 absolute (they are O(1)),
//   each gradient tensor within 1e-4 of its largest entry (max |ours -
//   torch| <= 1e-4 * max |torch| + 1e-7).
// With dropout 0, and with dropout 0.1 (one training step): there the test
// draws every dropout site's mask with lockstep's own kernels (DropoutForward
// and DropoutRange on ones, each node's seed as Model::Forward derives it),
// hands them to the reference (--masks), which multiplies by them where
// Hugging Face's BERT drops (embeddings, attention probabilities, each
// sub-layer's output before its residual), and the same bounds hold. It also
// checks that the masks drop about the rate's share and that the step with
// dropout is far from the one without (dropout silently off cannot pass).
// Skips, saying why, where /usr/bin/python3 has no torch.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/checkpoint/safetensors.h"
#include "core/job/job_spec.h"
#include "core/layers/attention.h"
#include "core/layers/simple_layers.h"
#include "core/model/graph.h"
#include "core/model/model.h"
#include "gtest/gtest.h"
#include "kernels/cpu/dropout.h"
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
constexpr double kDropout = 0.1;

// `init` "": the layers' own initializers.
ModelSpec BertSpec(int layers, const std::string& init, double dropout) {
  const std::string init_field =
      init.empty() ? ""
                   : absl::StrFormat(R"(, "init": {"safetensors": "%s"})", init);
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
                      "dropout": %.17g}],
          "param_names": "torch"%s})",
      kLength, kLength, kLength, kPredictions, kVocab, layers, dropout,
      init_field));
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : ModelSpec();
}

// Writes the reference's files for `layers` into `dir`.
void RunReference(const std::string& dir, int layers,
                  const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv = {
      "/usr/bin/python3", Runfile("tests/torch_bert_reference.py"), "--out",
      dir, "--layers", std::to_string(layers), "--seed",
      std::to_string(10 + layers), "--vocab", std::to_string(kVocab),
      "--length", std::to_string(kLength), "--predictions",
      std::to_string(kPredictions), "--batch", std::to_string(kBatch),
      // Weights of a trained model's scale: at BERT's 0.02 attention is
      // nearly uniform and the query and key gradients nearly vanish.
      "--std", "0.3"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  testing::RunResult ref = RunProcess(argv, dir, 120);
  ASSERT_TRUE(ref.exit.exited && ref.exit.exit_code == 0) << ref.err;
}

std::unique_ptr<Model> BuildBert(int layers, const std::string& init,
                                 double dropout) {
  absl::StatusOr<std::unique_ptr<Model>> built =
      Model::Build(BertSpec(layers, init, dropout), 1);
  EXPECT_TRUE(built.ok()) << built.status();
  return built.ok() ? std::move(*built) : nullptr;
}

// The reference's batch as lockstep's: a sample is its inputs' values one
// after another; labels -1 where a slot is unused.
struct Batch {
  Tensor x;
  std::vector<int32_t> labels;
  int count = 0;  // labelled slots
};

Batch ReadBatch(const std::string& path) {
  std::map<std::string, Tensor> in = ReadTensors(path);
  Batch b;
  const int per = 3 * kLength + kPredictions;
  b.x = Tensor({kBatch, per});
  for (int s = 0; s < kBatch; ++s) {
    float* row = b.x.data() + s * per;
    int at = 0;
    for (const char* field :
         {"token_ids", "segment_ids", "padding_mask", "mask_positions"}) {
      const Tensor& t = in.at(field);
      const int64_t w = t.shape()[1];
      std::copy(t.data() + s * w, t.data() + (s + 1) * w, row + at);
      at += static_cast<int>(w);
    }
  }
  for (float v : in.at("label_values").values()) {
    b.labels.push_back(static_cast<int32_t>(v));
    b.count += v >= 0;
  }
  return b;
}

// One training step; the reference's loss is the mean over labelled slots.
double Step(Model& m, const Batch& b, uint64_t dropout_seed) {
  const BatchLoss loss = m.TrainStep(
      b.x, b.labels.data(), LossNamed("sparse_categorical_crossentropy"),
      1.0f / b.count, dropout_seed);
  EXPECT_EQ(loss.count, b.count);
  return loss.loss_sum / b.count;
}

// Checks every parameter's gradient against `expected`'s grad.<name> within
// 1e-4 of the tensor's largest entry (+1e-7); returns the worst ratio
// (difference over largest entry), the key biases left out.
double CheckGradients(const Model& m,
                      const std::map<std::string, Tensor>& expected,
                      int layers) {
  int checked = 0;
  double worst = 0;
  for (Param* p : m.params()) {
    auto it = expected.find("grad." + p->name);
    if (it == expected.end() || it->second.shape() != p->grad.shape()) {
      ADD_FAILURE() << p->name << ": no gradient of its shape in the reference";
      continue;
    }
    // The key bias's gradient is zero in exact arithmetic (a softmax does
    // not see a shift shared by every key; dropout after the softmax does
    // not change that): rounding noise on both sides, hence the floor 1e-7.
    const double scale = MaxAbs(it->second.data(), it->second.size());
    const double diff =
        MaxDiff(p->grad.data(), it->second.data(), p->grad.size());
    EXPECT_LE(diff, 1e-4 * scale + 1e-7) << p->name;
    if (p->name.find("key.bias") == std::string::npos) {
      EXPECT_GT(scale, 1e-4) << p->name;
      worst = std::max(worst, diff / scale);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 16 * layers + 10);  // every parameter (decoder tied)
  return worst;
}

class BertTorchTest : public ::testing::TestWithParam<int> {};

TEST_P(BertTorchTest, LossLogitsAndEveryGradientAgree) {
  LOCKSTEP_SKIP_OR_FAIL_IF_MISSING(TorchMissing());
  const int layers = GetParam();
  const std::string dir = NewTempDir("bert_ref");
  ASSERT_NO_FATAL_FAILURE(RunReference(dir, layers));
  std::unique_ptr<Model> m = BuildBert(layers, dir + "/model.safetensors", 0);
  ASSERT_NE(m, nullptr);
  // Hugging Face files carry an integer position_ids buffer: not a
  // parameter, left out.
  EXPECT_EQ(m->graph().init_unused(),
            std::vector<std::string>{"bert.embeddings.position_ids"});
  const Batch batch = ReadBatch(dir + "/batch.safetensors");
  std::map<std::string, Tensor> expected =
      ReadTensors(dir + "/expected.safetensors");
  ASSERT_EQ(batch.count, kBatch * kPredictions - 1);  // one unused slot

  const double loss = Step(*m, batch, 0);
  const double torch_loss = expected.at("loss").data()[0];
  EXPECT_NEAR(loss, torch_loss, 1e-5 * torch_loss);
  const double worst = CheckGradients(*m, expected, layers);
  std::printf(
      "%d layers: loss %.8f (torch %.8f), worst gradient difference "
      "%.2e of its tensor's largest entry\n",
      layers, loss, torch_loss, worst);

  const float* logits = m->Predict(batch.x);
  const Tensor& want = expected.at("logits");
  ASSERT_EQ(want.size(), kBatch * kPredictions * kVocab);
  EXPECT_LE(MaxDiff(logits, want.data(), want.size()), 1e-4);
}

// Every dropout site's mask in a training step of `n` samples at
// `dropout_seed`, by lockstep's kernels on ones (0 or 1/(1-rate)), each
// node seeded as Model::Forward seeds it. Keyed by Hugging Face's module
// name: a dropout layer by its name ([n, L, H]); an attention layer's
// probability dropout as <layer>.self.dropout ([n, heads, L, L]: each
// (sample, head)'s [L, L] at element offset sh * L * L, as
// DropProbabilities draws it).
std::map<std::string, Tensor> DropoutMasks(const Model& m, int64_t n,
                                           uint64_t dropout_seed) {
  std::map<std::string, Tensor> masks;
  for (const GraphNode& node : m.graph().nodes()) {
    const uint64_t seed =
        Mix64(dropout_seed ^ Mix64(static_cast<uint64_t>(node.layer_index)));
    if (const auto* d = dynamic_cast<const DropoutLayer*>(node.layer)) {
      Shape shape = {n};
      shape.insert(shape.end(), node.shape.begin(), node.shape.end());
      Tensor mask(shape);
      const std::vector<float> ones(mask.size(), 1.0f);
      DropoutForward(mask.size(), d->rate(), seed, ones.data(), mask.data());
      masks.emplace(node.name, std::move(mask));
    } else if (const auto* a =
                   dynamic_cast<const MultiHeadAttentionLayer*>(node.layer)) {
      const int64_t l = a->length(), h = a->heads();
      Tensor mask({n, h, l, l});
      const std::vector<float> ones(l * l, 1.0f);
      for (int64_t sh = 0; sh < n * h; ++sh) {
        DropoutRange(sh * l * l, l * l, a->rate(), seed, ones.data(),
                     mask.data() + sh * l * l);
      }
      masks.emplace(node.name + ".self.dropout", std::move(mask));
    }
  }
  return masks;
}

// How many of `mask`'s entries are dropped; each must be 0 or `keep`.
int64_t Dropped(const std::string& site, const Tensor& mask, float keep) {
  int64_t dropped = 0;
  for (float v : mask.values()) {
    EXPECT_TRUE(v == 0.0f || v == keep) << site << " holds " << v;
    dropped += v == 0.0f;
  }
  return dropped;
}

TEST_P(BertTorchTest, DropoutStepAgreesUnderLockstepsMasks) {
  LOCKSTEP_SKIP_OR_FAIL_IF_MISSING(TorchMissing());
  const int layers = GetParam();
  const uint64_t seed = 2024 + layers;
  const std::string dir = NewTempDir("bert_dropout_ref");
  // The masks depend on the graph (layer indices, shapes, rates), not the
  // weights: drawn from a model with its own initializers before the
  // reference has written its weights, checked below against the model
  // that loads them.
  std::unique_ptr<Model> shape_only = BuildBert(layers, "", kDropout);
  ASSERT_NE(shape_only, nullptr);
  const std::map<std::string, Tensor> masks =
      DropoutMasks(*shape_only, kBatch, seed);
  ASSERT_EQ(masks.size(), 1u + 3u * layers);  // embeddings, 3 per layer
  const float keep = 1.0f / (1.0f - static_cast<float>(kDropout));
  int64_t dropped = 0, entries = 0;
  double least = 1, most = 0;
  std::vector<std::pair<std::string, const Tensor*>> to_write;
  for (const auto& [site, mask] : masks) {
    const int64_t d = Dropped(site, mask, keep);
    const double share = static_cast<double>(d) / mask.size();
    // A site has >= 480 entries: 5% and 15% are over 3.6 sd from 10%.
    EXPECT_GE(share, 0.05) << site;
    EXPECT_LE(share, 0.15) << site;
    least = std::min(least, share);
    most = std::max(most, share);
    dropped += d;
    entries += mask.size();
    to_write.emplace_back(site, &mask);
  }
  const std::string masks_path = dir + "/masks.safetensors";
  ASSERT_TRUE(WriteSafetensors(masks_path, to_write, {}).ok());
  ASSERT_NO_FATAL_FAILURE(RunReference(dir, layers, {"--masks", masks_path}));

  const std::string init = dir + "/model.safetensors";
  std::unique_ptr<Model> m = BuildBert(layers, init, kDropout);
  std::unique_ptr<Model> off = BuildBert(layers, init, 0);
  ASSERT_TRUE(m != nullptr && off != nullptr);
  const std::map<std::string, Tensor> again = DropoutMasks(*m, kBatch, seed);
  ASSERT_EQ(again.size(), masks.size());
  for (const auto& [site, mask] : masks) {
    ASSERT_EQ(again.count(site), 1u) << site;
    EXPECT_EQ(again.at(site).values(), mask.values()) << site;
  }
  const Batch batch = ReadBatch(dir + "/batch.safetensors");
  std::map<std::string, Tensor> expected =
      ReadTensors(dir + "/expected.safetensors");
  ASSERT_EQ(batch.count, kBatch * kPredictions - 1);

  const double loss = Step(*m, batch, seed);
  const double torch_loss = expected.at("loss").data()[0];
  EXPECT_NEAR(loss, torch_loss, 1e-5 * torch_loss);
  const double worst = CheckGradients(*m, expected, layers);

  // Dropout is on on both sides: the torch step moved away from the
  // inference logits, and lockstep's loss and gradients away from its step
  // without dropout, by far more than the bounds above.
  const Tensor& train_logits = expected.at("logits");
  const Tensor& eval_logits = expected.at("eval_logits");
  ASSERT_EQ(eval_logits.size(), kBatch * kPredictions * kVocab);
  const double torch_moved = MaxDiff(train_logits.data(), eval_logits.data(),
                                     eval_logits.size());
  EXPECT_GT(torch_moved, 0.05);
  const double loss_off = Step(*off, batch, seed);
  EXPECT_GT(std::fabs(loss - loss_off), 1e-3 * torch_loss);
  double moved = 0;  // the largest gradient change, over its tensor's scale
  for (size_t i = 0; i < m->params().size(); ++i) {
    const Tensor& on = m->params()[i]->grad;
    const Tensor& without = off->params()[i]->grad;
    ASSERT_EQ(on.shape(), without.shape());
    moved = std::max(moved, MaxDiff(on.data(), without.data(), on.size()) /
                                std::max(MaxAbs(without.data(), on.size()),
                                         1e-30));
  }
  EXPECT_GT(moved, 1e-2);  // 100 times the gradient bound

  // Inference has no dropout: the same logits as torch's without masks.
  const float* logits = m->Predict(batch.x);
  const double logit_diff =
      MaxDiff(logits, eval_logits.data(), eval_logits.size());
  EXPECT_LE(logit_diff, 1e-4);
  std::printf(
      "%d layers, dropout %.1f: masks drop %.1f%% of %lld entries (sites "
      "%.1f%% to %.1f%%); loss %.8f (torch %.8f, |diff| %.1e <= %.1e; "
      "without dropout %.8f); worst gradient difference %.2e of its "
      "tensor's largest entry (<= 1e-4; dropout moves a gradient by up to "
      "%.2f of it); inference logits within %.1e (<= 1e-4) of torch's, "
      "torch's training logits %.3f from them\n",
      layers, kDropout, 100.0 * dropped / entries,
      static_cast<long long>(entries), 100 * least, 100 * most, loss,
      torch_loss, std::fabs(loss - torch_loss), 1e-5 * torch_loss, loss_off,
      worst, moved, logit_diff, torch_moved);
}

// "precision": "bf16" (Model::SetPrecision): the same step against
// torch.autocast("cpu", dtype=torch.bfloat16) on the same weights and batch
// (the reference's --autocast). The two policies differ where autocast
// keeps a matmul's output, and the GELU and residual adds after it, in
// bfloat16 (here every output is float32), so the bounds are bfloat16's:
// loss within kBf16Loss relative, each gradient tensor within kBf16Grad of
// its largest entry (measured: 1.6e-2 with 1 layer, 4.1e-2 with 2; float32
// itself is 2.5e-2 and 3.3e-2 from autocast). So the bound alone would
// pass float32 too: the bf16 step must also move its gradients away from
// lockstep's float32 step's (by more than 1e-3 of a tensor's largest
// entry; measured 1.5e-2) and lie nearer autocast's than those do, on
// average over the tensors.
constexpr double kBf16Loss = 2e-3, kBf16Grad = 6e-2;

TEST_P(BertTorchTest, Bf16StepAgreesWithTorchAutocast) {
  LOCKSTEP_SKIP_OR_FAIL_IF_MISSING(TorchMissing());
  const int layers = GetParam();
  const std::string dir = NewTempDir("bert_bf16_ref");
  ASSERT_NO_FATAL_FAILURE(RunReference(dir, layers, {"--autocast"}));
  const std::string init = dir + "/model.safetensors";
  std::unique_ptr<Model> bf16 = BuildBert(layers, init, 0);
  std::unique_ptr<Model> fp32 = BuildBert(layers, init, 0);
  ASSERT_TRUE(bf16 != nullptr && fp32 != nullptr);
  bf16->SetPrecision(GemmPrecision::kBf16);
  const Batch batch = ReadBatch(dir + "/batch.safetensors");
  const std::map<std::string, Tensor> expected =
      ReadTensors(dir + "/expected.safetensors");
  const double loss = Step(*bf16, batch, 0);
  const double loss32 = Step(*fp32, batch, 0);
  const double torch_loss = expected.at("loss").data()[0];
  EXPECT_NEAR(loss, torch_loss, kBf16Loss * torch_loss);
  // Per tensor, over its largest entry in autocast's gradient: bf16 against
  // autocast, fp32 against autocast, bf16 against fp32.
  double worst = 0, worst32 = 0, moved = 0, sum = 0, sum32 = 0;
  int checked = 0;
  for (size_t i = 0; i < bf16->params().size(); ++i) {
    const Param* p = bf16->params()[i];
    if (p->name.find("key.bias") != std::string::npos) continue;  // ~0
    const Tensor& want = expected.at("grad." + p->name);
    ASSERT_EQ(want.shape(), p->grad.shape()) << p->name;
    const double scale = MaxAbs(want.data(), want.size());
    const double d = MaxDiff(p->grad.data(), want.data(), want.size()) / scale;
    const double d32 =
        MaxDiff(fp32->params()[i]->grad.data(), want.data(), want.size()) /
        scale;
    EXPECT_LE(d, kBf16Grad) << p->name;
    worst = std::max(worst, d);
    worst32 = std::max(worst32, d32);
    sum += d;
    sum32 += d32;
    moved = std::max(
        moved,
        MaxDiff(p->grad.data(), fp32->params()[i]->grad.data(), want.size()) /
            scale);
    ++checked;
  }
  EXPECT_EQ(checked, 16 * layers + 10 - layers);
  EXPECT_GT(moved, 1e-3);  // bf16 is on
  EXPECT_LT(sum, sum32);   // and nearer autocast than float32 is
  const float* logits = bf16->Predict(batch.x);
  const Tensor& want_logits = expected.at("logits");
  const double logit_diff =
      MaxDiff(logits, want_logits.data(), want_logits.size());
  EXPECT_LE(logit_diff, 5e-2);
  std::printf(
      "%d layers, bf16 against torch.autocast: loss %.6f (autocast %.6f, "
      "float32 %.6f); worst gradient difference %.2e of its tensor's "
      "largest entry (<= %.0e; float32's %.2e), mean %.2e (float32's "
      "%.2e); bf16 moves a gradient by up to %.2e from float32's; logits "
      "within %.2e\n",
      layers, loss, torch_loss, loss32, worst, kBf16Grad, worst32,
      sum / checked, sum32 / checked, moved, logit_diff);
}

INSTANTIATE_TEST_SUITE_P(Layers, BertTorchTest, ::testing::Values(1, 2));

}  // namespace
}  // namespace lockstep
