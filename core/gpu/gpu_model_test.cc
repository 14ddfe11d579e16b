// GpuModel against core/model/model.h's Model on the same spec and seed: loss,
// accuracy and every parameter gradient of TrainStep, Evaluate, and 5 SGD
// steps applied on the host to both. FP32 on both sides (TF32 off), so the
// only differences are summation order and CUDA's expf/tanhf: tolerance
// max |gpu - cpu| <= 1e-4 * max |cpu| per tensor (1e-4 relative on losses).
// Without a device, Create must fail with kFailedPrecondition saying why.
#include "core/gpu/gpu_model.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "core/job/job_spec.h"
#include "core/model/model.h"
#include "core/tensor.h"
#include "core/train/optimizer.h"
#include "gtest/gtest.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cuda/cuda_test_util.h"

namespace lockstep {
namespace cuda {
namespace {

constexpr uint64_t kSeed = 1;
constexpr int64_t kBatch = 32;
constexpr float kTol = 1e-4f;

ModelSpec FromJson(const char* json) {
  absl::StatusOr<ModelSpec> m = ParseModelSpec(json);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : ModelSpec();
}

// examples/mnist_mlp.json's model section.
ModelSpec MnistMlp() {
  return FromJson(R"({"input_shape": [784], "layers": [
      {"type": "dense", "units": 256, "activation": "relu"},
      {"type": "dense", "units": 256, "activation": "relu"},
      {"type": "dense", "units": 10}]})");
}

// examples/mnist_cnn.json's model section.
ModelSpec MnistCnn() {
  return FromJson(R"({"input_shape": [28, 28, 1], "layers": [
      {"type": "conv2d", "filters": 32, "kernel_size": 3, "activation": "relu"},
      {"type": "max_pool2d"}, {"type": "flatten"},
      {"type": "dense", "units": 64, "activation": "relu"},
      {"type": "dense", "units": 10}]})");
}

// MobileNetV2's pieces: a frozen conv (inference mode, no backward), batch
// norm with ReLU6 in training mode (its statistics' "gradients" compared
// too), a depthwise conv with PyTorch's padding, global average pooling.
ModelSpec BatchNormCnn() {
  return FromJson(R"({"input_shape": [9, 9, 3], "layers": [
      {"type": "conv2d", "filters": 8, "kernel_size": 3, "padding": 1,
       "use_bias": false, "trainable": false},
      {"type": "batch_norm", "momentum": 0.9, "activation": "relu6"},
      {"type": "depthwise_conv2d", "kernel_size": 3, "strides": 2,
       "padding": 1, "use_bias": false},
      {"type": "batch_norm", "epsilon": 0.00001},
      {"type": "global_average_pooling2d"},
      {"type": "dense", "units": 10}]})");
}

// The rest: dropout, tanh/sigmoid/GELU, a softmax output (fused with
// cross-entropy, or through its Jacobian with MSE), 'same' convs with
// TF's asymmetric padding (stride 2 on 15x15), no-bias layers, a conv in
// 2 groups (cuDNN's group count against the CPU's per-group GEMMs).
ModelSpec MixedCnn() {
  return FromJson(R"({"input_shape": [15, 15, 2], "layers": [
      {"type": "conv2d", "filters": 8, "kernel_size": 3, "strides": 2,
       "padding": "same", "activation": "relu"},
      {"type": "conv2d", "filters": 6, "kernel_size": 3, "padding": "same",
       "activation": "tanh", "use_bias": false, "groups": 2},
      {"type": "flatten"}, {"type": "dropout", "rate": 0.3},
      {"type": "dense", "units": 32, "activation": "gelu"},
      {"type": "dense", "units": 32, "activation": "sigmoid"},
      {"type": "dense", "units": 10, "activation": "softmax"}]})");
}

float MaxAbs(const float* v, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(v[i]));
  return m;
}

// max |got - want| <= kTol * max |want| (absolute 1e-7 floor for all-zero
// tensors such as the gradient of a bias behind a dead ReLU).
void ExpectTensorNear(const Tensor& want, const Tensor& got,
                      const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  const float tol = std::max(kTol * MaxAbs(want.data(), want.size()), 1e-7f);
  float worst = 0.0f;
  int64_t at = 0;
  for (int64_t i = 0; i < want.size(); ++i) {
    const float d = std::fabs(want.data()[i] - got.data()[i]);
    if (d > worst) worst = d, at = i;
  }
  EXPECT_LE(worst, tol) << what << ": worst at " << at << " cpu "
                        << want.data()[at] << " gpu " << got.data()[at];
}

void ExpectLossNear(const BatchLoss& want, const BatchLoss& got,
                    const std::string& what) {
  EXPECT_EQ(want.count, got.count) << what;
  EXPECT_NEAR(want.loss_sum, got.loss_sum,
              kTol * std::max(1.0, std::fabs(want.loss_sum)))
      << what;
  // An argmax may flip on a near tie between two logits.
  EXPECT_LE(std::abs(want.correct - got.correct), 1) << what;
}

struct Case {
  const char* name;
  ModelSpec (*spec)();
  const char* loss;  // looked up when the test runs (after registration)
};

class GpuModelTest : public ::testing::TestWithParam<Case> {};

TEST_P(GpuModelTest, TrainStepsAndEvaluateMatchCpuModel) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const Case c = GetParam();
  const ModelSpec spec = c.spec();
  absl::StatusOr<std::unique_ptr<Model>> cpu = Model::Build(spec, kSeed);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  // Receives the GPU's gradients; its values track the GPU's parameters.
  absl::StatusOr<std::unique_ptr<Model>> mirror = Model::Build(spec, kSeed);
  ASSERT_TRUE(mirror.ok()) << mirror.status();
  absl::StatusOr<std::unique_ptr<GpuModel>> gpu = GpuModel::Create(spec, kSeed);
  ASSERT_TRUE(gpu.ok()) << gpu.status();

  const int64_t in = NumElements(spec.single_input_shape());
  const int64_t classes = NumElements((*cpu)->output_shape());
  // single_input_shape() returns a copy: one copy for both iterators.
  const Shape sample = spec.single_input_shape();
  Shape xshape = {kBatch};
  xshape.insert(xshape.end(), sample.begin(), sample.end());
  const std::vector<float> xv = RandomVector(kBatch * in, 11, 0.0f, 1.0f);
  const Tensor x(xshape, xv);
  std::vector<int32_t> labels(kBatch);
  std::mt19937 gen(12);
  for (int32_t& l : labels) l = static_cast<int32_t>(gen() % classes);

  std::vector<int> cpu_order, gpu_order;
  (*cpu)->SetGradReadyCallback([&](int p) { cpu_order.push_back(p); });
  (*gpu)->SetGradReadyCallback([&](int p) { gpu_order.push_back(p); });

  std::vector<Param*> cpu_params = (*cpu)->params();
  std::vector<Param*> gpu_params = (*mirror)->params();
  const float lr = 0.1f, scale = 1.0f / kBatch;
  for (int step = 0; step < 5; ++step) {
    SCOPED_TRACE(::testing::Message() << c.name << " step " << step);
    const uint64_t dropout_seed = 1000 + step;
    const BatchLoss want = (*cpu)->TrainStep(
        x, labels.data(), LossNamed(c.loss), scale, dropout_seed);
    absl::StatusOr<BatchLoss> got =
        (*gpu)->TrainStep(xv.data(), labels.data(), kBatch, LossNamed(c.loss),
                          scale, dropout_seed);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectLossNear(want, *got, "train loss");
    ASSERT_TRUE((*gpu)->CopyGradsToHost(gpu_params).ok());
    for (size_t i = 0; i < cpu_params.size(); ++i) {
      ExpectTensorNear(cpu_params[i]->grad, gpu_params[i]->grad,
                       cpu_params[i]->name + " grad");
    }
    // Plain SGD on the host, to both; batch norm's running statistics move
    // by their moving average instead (an SGD step on a variance can make
    // it negative: NaN on both sides). The GPU gets its updated copy.
    for (size_t i = 0; i < cpu_params.size(); ++i) {
      for (Param* p : {cpu_params[i], gpu_params[i]}) {
        if (p->update == ParamUpdate::kMovingAverage) {
          UpdateMovingAverages({p}, kBatch);
          continue;
        }
        float* v = p->value.data();
        const float* g = p->grad.data();
        for (int64_t j = 0; j < p->value.size(); ++j) v[j] -= lr * g[j];
      }
      ExpectTensorNear(cpu_params[i]->value, gpu_params[i]->value,
                       cpu_params[i]->name + " value");
    }
    ASSERT_TRUE((*gpu)->CopyParamsFromHost(gpu_params).ok());
  }
  EXPECT_EQ(cpu_order, gpu_order);

  const BatchLoss want = (*cpu)->Evaluate(x, labels.data(), LossNamed(c.loss));
  absl::StatusOr<BatchLoss> got =
      (*gpu)->Evaluate(xv.data(), labels.data(), kBatch, LossNamed(c.loss));
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectLossNear(want, *got, "evaluate");

  // A smaller batch after a larger one reuses the buffers (and a new conv
  // plan); an empty batch zeroes every gradient.
  const int64_t small = 3;
  const Tensor xs(
      [&] {
        Shape s = xshape;
        s[0] = small;
        return s;
      }(),
      std::vector<float>(xv.begin(), xv.begin() + small * in));
  const BatchLoss want_small =
      (*cpu)->TrainStep(xs, labels.data(), LossNamed(c.loss), 1.0f, 5);
  got = (*gpu)->TrainStep(xv.data(), labels.data(), small, LossNamed(c.loss),
                          1.0f, 5);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectLossNear(want_small, *got, "batch of 3");
  got = (*gpu)->TrainStep(nullptr, nullptr, 0, LossNamed(c.loss), 1.0f, 5);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->count, 0);
  ASSERT_TRUE((*gpu)->CopyGradsToHost(gpu_params).ok());
  for (Param* p : gpu_params) {
    EXPECT_EQ(MaxAbs(p->grad.data(), p->grad.size()), 0.0f) << p->name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, GpuModelTest,
    ::testing::Values(
        Case{"mnist_mlp", MnistMlp, "sparse_categorical_crossentropy"},
        Case{"mnist_cnn", MnistCnn, "sparse_categorical_crossentropy"},
        Case{"mixed_xent", MixedCnn, "sparse_categorical_crossentropy"},
        Case{"mixed_mse", MixedCnn, "mse"},
        Case{"batch_norm", BatchNormCnn, "sparse_categorical_crossentropy"}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return std::string(info.param.name);
    });

// Staged input: a batch staged ahead (its host arrays overwritten at once)
// trains exactly as TrainStep on the same batch does; at most two staged
// batches are kept, a third reuses the oldest slot, and a stale ticket is
// refused; a larger batch grows the slots.
TEST(GpuModelStagingTest, StagedBatchesTrainAsTrainStepDoes) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const ModelSpec spec = MnistCnn();
  absl::StatusOr<std::unique_ptr<GpuModel>> staged =
      GpuModel::Create(spec, kSeed);
  absl::StatusOr<std::unique_ptr<GpuModel>> direct =
      GpuModel::Create(spec, kSeed);
  ASSERT_TRUE(staged.ok()) << staged.status();
  ASSERT_TRUE(direct.ok()) << direct.status();
  const int64_t in = NumElements(spec.single_input_shape());
  const Loss& loss = LossNamed("sparse_categorical_crossentropy");
  auto batch = [&](int64_t n, uint32_t seed) {
    std::pair<std::vector<float>, std::vector<int32_t>> b;
    b.first = RandomVector(n * in, seed, 0.0f, 1.0f);
    for (int64_t i = 0; i < n; ++i) b.second.push_back((i * 7 + seed) % 10);
    return b;
  };
  auto b1 = batch(kBatch, 21), b2 = batch(kBatch, 22), b3 = batch(50, 23);

  auto s1 = batch(kBatch, 21);
  absl::StatusOr<GpuModel::StagedInput> t1 =
      (*staged)->StageInputs(s1.first.data(), s1.second.data(), kBatch);
  ASSERT_TRUE(t1.ok()) << t1.status();
  s1.first.assign(s1.first.size(), 99.0f);  // staging copied it
  auto s2 = batch(kBatch, 22);
  absl::StatusOr<GpuModel::StagedInput> t2 =
      (*staged)->StageInputs(s2.first.data(), s2.second.data(), kBatch);
  ASSERT_TRUE(t2.ok()) << t2.status();
  s2.second.assign(s2.second.size(), 3);

  // Where the two models' gradients are compared.
  absl::StatusOr<std::unique_ptr<Model>> want_model = Model::Build(spec, kSeed);
  absl::StatusOr<std::unique_ptr<Model>> got_model = Model::Build(spec, kSeed);
  ASSERT_TRUE(want_model.ok() && got_model.ok());
  std::vector<Param*> want_params = (*want_model)->params();
  std::vector<Param*> got_params = (*got_model)->params();

  auto expect_same_step =
      [&](const GpuModel::StagedInput& t,
          const std::pair<std::vector<float>, std::vector<int32_t>>& b,
          int64_t n, const char* what) {
        SCOPED_TRACE(what);
        ASSERT_TRUE((*staged)->EnqueueTrainStep(t, loss, 0.5f, 7).ok());
        absl::StatusOr<BatchLoss> got = (*staged)->FinishStep();
        absl::StatusOr<BatchLoss> want = (*direct)->TrainStep(
            b.first.data(), b.second.data(), n, loss, 0.5f, 7);
        ASSERT_TRUE(got.ok()) << got.status();
        ASSERT_TRUE(want.ok()) << want.status();
        EXPECT_EQ(got->loss_sum, want->loss_sum);
        EXPECT_EQ(got->correct, want->correct);
        EXPECT_EQ(got->count, n);
        ASSERT_TRUE((*staged)->CopyGradsToHost(got_params).ok());
        ASSERT_TRUE((*direct)->CopyGradsToHost(want_params).ok());
        for (size_t i = 0; i < got_params.size(); ++i) {
          EXPECT_EQ(got_params[i]->grad.values(), want_params[i]->grad.values())
              << got_params[i]->name;
        }
      };
  expect_same_step(*t1, b1, kBatch, "first staged batch");
  // A third staging takes the first's slot: its ticket is stale now.
  absl::StatusOr<GpuModel::StagedInput> t3 =
      (*staged)->StageInputs(b3.first.data(), b3.second.data(), 50);
  ASSERT_TRUE(t3.ok()) << t3.status();
  const absl::Status stale = (*staged)->EnqueueTrainStep(*t1, loss, 0.5f, 7);
  EXPECT_EQ(stale.code(), absl::StatusCode::kInvalidArgument) << stale;
  EXPECT_TRUE(absl::StrContains(stale.message(), "overwritten")) << stale;
  expect_same_step(*t2, b2, kBatch, "second staged batch");
  expect_same_step(*t3, b3, 50, "a larger batch grew the slot");
}

TEST(GpuModelCreateTest, WithoutDeviceFailsWithFailedPrecondition) {
  const std::string why = WhyNoDevice();
  if (why.empty()) GTEST_SKIP() << "a usable GPU is present";
  absl::StatusOr<std::unique_ptr<GpuModel>> gpu =
      GpuModel::Create(MnistMlp(), kSeed);
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kFailedPrecondition)
      << gpu.status();
  EXPECT_TRUE(absl::StartsWith(gpu.status().message(), "GpuModel: "))
      << gpu.status();
  EXPECT_TRUE(absl::StrContains(gpu.status().message(), "CUDA"))
      << gpu.status();
}

TEST(GpuModelCreateTest, BadSpecIsInvalidArgumentWhenADeviceIsPresent) {
  SKIP_WITHOUT_CUDA_DEVICE();
  // (Dense now applies to the last axis, as Keras', so a missing flatten is
  // no longer an error: an input nothing produces is.)
  ModelSpec spec = MnistCnn();
  spec.layers[1].inputs = {"no_such_layer"};
  absl::StatusOr<std::unique_ptr<GpuModel>> gpu = GpuModel::Create(spec, kSeed);
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kInvalidArgument)
      << gpu.status();
  EXPECT_TRUE(absl::StrContains(gpu.status().message(), "no_such_layer"))
      << gpu.status();
}

}  // namespace
}  // namespace cuda
}  // namespace lockstep
