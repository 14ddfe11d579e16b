// `lockstep train`'s loop (core/train/local_training.h) on GPUs, end to end:
// the job's replicas on cuda:N train through GpuReplicas (NCCL over the local
// GPUs, the update on each device) and must
//   - reach the CPU run's parameters: after 2 epochs of SGD with momentum,
//     every tensor within 1e-3 * its largest CPU value (FP32 on both sides;
//     the only differences are summation order and CUDA's expf);
//   - be deterministic on the device: a run stopped midway and resumed from
//     its checkpoint ends with the uninterrupted run's fingerprint, and so
//     does a second uninterrupted run;
//   - with two GPUs (skipped with fewer), agree with the CPU's two replicas.
// Without a device each test skips, saying why.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "core/checkpoint/checkpoint.h"
#include "core/job/job_spec.h"
#include "core/model/model.h"
#include "core/train/local_training.h"
#include "gtest/gtest.h"
#include "kernels/cuda/cuda_test_util.h"
#include "kernels/cuda/device.h"

namespace lockstep {
namespace cuda {
namespace {

// A small CNN on the built-in synthetic data (conv, pooling, dense, the
// fused softmax cross-entropy); `optimizer` and `replicas` vary.
JobSpec SmallCnnJob(const std::string& optimizer, int replicas) {
  const std::string text = absl::StrCat(R"({
    "name": "gpu_train",
    "seed": 5,
    "model": {"input_shape": [8, 8, 1], "layers": [
      {"type": "conv2d", "filters": 6, "kernel_size": 3, "activation": "relu"},
      {"type": "max_pool2d"},
      {"type": "flatten"},
      {"type": "dense", "units": 24, "activation": "relu"},
      {"type": "dense", "units": 10}]},
    "loss": "sparse_categorical_crossentropy",
    "optimizer": )",
                                        optimizer, R"(,
    "data": {"format": "synthetic", "train_samples": 640,
             "test_samples": 200, "seed": 3},
    "batch_size_per_replica": 16,
    "epochs": 2,
    "checkpoint": {"every_steps": 0, "keep": 2},
    "summary": {"every_steps": 100},
    "cluster": {"workers": 1, "replicas_per_worker": )",
                                        replicas, R"(}
  })");
  absl::StatusOr<JobSpec> spec = ParseJobSpec(text);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : JobSpec();
}

constexpr char kSgd[] =
    R"({"type": "sgd", "learning_rate": 0.05, "momentum": 0.9})";
constexpr char kAdam[] = R"({"type": "adam", "learning_rate": 0.003})";

std::string Storage(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return JoinPath(tmp != nullptr ? tmp : "/tmp", name);
}

TrainResult Train(const JobSpec& spec, const std::string& storage,
                  std::vector<int> gpus, int64_t stop_after = -1) {
  TrainOptions options;
  options.storage_dir = storage;
  options.threads = 2;
  options.cuda_devices = std::move(gpus);
  options.stop_after_steps = stop_after;
  absl::StatusOr<TrainResult> r = RunLocalTraining(spec, options);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : TrainResult();
}

// The model tensors of the run's last checkpoint, by name.
std::vector<std::pair<std::string, Tensor>> FinalParams(
    const std::string& storage, const JobSpec& spec) {
  CheckpointStore store(
      JoinPath(JoinPath(JoinPath(storage, "jobs"), spec.name), "checkpoints"),
      0);
  std::vector<std::string> warnings;
  absl::StatusOr<LoadedCheckpoint> loaded = store.LoadLatest(&warnings);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return loaded.ok() ? loaded->model
                     : std::vector<std::pair<std::string, Tensor>>();
}

void ExpectParamsClose(const std::vector<std::pair<std::string, Tensor>>& cpu,
                       const std::vector<std::pair<std::string, Tensor>>& gpu) {
  ASSERT_EQ(cpu.size(), gpu.size());
  ASSERT_FALSE(cpu.empty());
  for (size_t i = 0; i < cpu.size(); ++i) {
    ASSERT_EQ(cpu[i].first, gpu[i].first);
    const Tensor& want = cpu[i].second;
    const Tensor& got = gpu[i].second;
    ASSERT_EQ(want.size(), got.size()) << want.size();
    float scale = 0.0f, worst = 0.0f;
    for (int64_t j = 0; j < want.size(); ++j) {
      scale = std::max(scale, std::fabs(want.data()[j]));
      worst = std::max(worst, std::fabs(want.data()[j] - got.data()[j]));
    }
    EXPECT_LE(worst, 1e-3f * scale) << cpu[i].first;
  }
}

int VisibleCount() {
  absl::StatusOr<std::vector<DeviceInfo>> d = VisibleDevices();
  return d.ok() ? static_cast<int>(d->size()) : 0;
}

TEST(GpuTrainingTest, OneGpuReachesTheCpuRunsParameters) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const JobSpec spec = SmallCnnJob(kSgd, 1);
  const TrainResult cpu = Train(spec, Storage("cpu1"), {});
  const TrainResult gpu = Train(spec, Storage("gpu1"), {0});
  ASSERT_TRUE(cpu.finished);
  ASSERT_TRUE(gpu.finished);
  EXPECT_EQ(gpu.steps, cpu.steps);
  EXPECT_EQ(gpu.steps, 80);
  EXPECT_NEAR(gpu.train_loss, cpu.train_loss, 1e-3 * cpu.train_loss);
  EXPECT_NEAR(gpu.test_accuracy, cpu.test_accuracy, 0.01);
  EXPECT_GT(gpu.test_accuracy, 0.3);  // it learned (10 classes)
  ExpectParamsClose(FinalParams(Storage("cpu1"), spec),
                    FinalParams(Storage("gpu1"), spec));
}

TEST(GpuTrainingTest, StopAndResumeOnTheGpuIsBitIdentical) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const JobSpec spec = SmallCnnJob(kAdam, 1);
  const TrainResult whole = Train(spec, Storage("whole"), {0});
  ASSERT_TRUE(whole.finished);
  const TrainResult again = Train(spec, Storage("again"), {0});
  EXPECT_EQ(again.fingerprint, whole.fingerprint) << "not deterministic";

  const TrainResult first = Train(spec, Storage("split"), {0}, 33);
  EXPECT_FALSE(first.finished);
  EXPECT_EQ(first.steps, 33);
  const TrainResult rest = Train(spec, Storage("split"), {0});
  ASSERT_TRUE(rest.finished);
  EXPECT_EQ(rest.resumed_from_step, 33);
  EXPECT_EQ(rest.fingerprint, whole.fingerprint);
  EXPECT_EQ(rest.test_accuracy, whole.test_accuracy);
}

// Batch norm's running statistics (updated on the device by the moving
// average, not the optimizer) and a frozen layer (never updated) train on
// the GPU as on the CPU: the same parameters and statistics, the frozen
// kernel unchanged.
TEST(GpuTrainingTest, BatchNormAndAFrozenLayerTrainAsOnTheCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  JobSpec spec = SmallCnnJob(kAdam, 1);
  absl::StatusOr<ModelSpec> model = ParseModelSpec(R"({
    "input_shape": [8, 8, 1], "layers": [
      {"type": "conv2d", "name": "stem", "filters": 6, "kernel_size": 3,
       "padding": 1, "use_bias": false, "trainable": false},
      {"type": "batch_norm", "name": "bn", "momentum": 0.9,
       "activation": "relu6"},
      {"type": "flatten"},
      {"type": "dense", "units": 10}]})");
  ASSERT_TRUE(model.ok()) << model.status();
  spec.model = *model;
  const TrainResult cpu = Train(spec, Storage("cpu_bn"), {});
  const TrainResult gpu = Train(spec, Storage("gpu_bn"), {0});
  ASSERT_TRUE(cpu.finished);
  ASSERT_TRUE(gpu.finished);
  EXPECT_NEAR(gpu.test_accuracy, cpu.test_accuracy, 0.02);
  const auto cpu_params = FinalParams(Storage("cpu_bn"), spec);
  const auto gpu_params = FinalParams(Storage("gpu_bn"), spec);
  ExpectParamsClose(cpu_params, gpu_params);
  absl::StatusOr<std::unique_ptr<Model>> fresh = Model::Build(spec.model, 5);
  ASSERT_TRUE(fresh.ok());
  for (const auto& [name, t] : gpu_params) {
    if (name == "stem/kernel") {
      EXPECT_EQ(t.values(), (*fresh)->params()[0]->value.values());
    }
    if (name == "bn/moving_variance") {
      EXPECT_NE(t.values(), std::vector<float>(6, 1.0f));  // it moved
    }
  }
}

// sync: true on GPUs: each sum of the pass goes through the host (the
// lanes' barrier, in lane order) and back, so one GPU, and two where the
// machine has them, train as the CPU replicas do.
TEST(GpuTrainingTest, SyncBatchNormTrainsAsOnTheCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (int gpus : {1, 2}) {
    if (gpus > VisibleCount()) continue;
    SCOPED_TRACE(absl::StrCat(gpus, " GPU(s)"));
    JobSpec spec = SmallCnnJob(kAdam, gpus);
    absl::StatusOr<ModelSpec> model = ParseModelSpec(R"({
      "input_shape": [8, 8, 1], "layers": [
        {"type": "conv2d", "name": "stem", "filters": 6, "kernel_size": 3,
         "padding": 1, "use_bias": false},
        {"type": "batch_norm", "name": "bn", "momentum": 0.9,
         "activation": "relu6", "sync": true},
        {"type": "flatten"},
        {"type": "dense", "units": 10}]})");
    ASSERT_TRUE(model.ok()) << model.status();
    spec.model = *model;
    const std::string tag = absl::StrCat("sync", gpus);
    std::vector<int> devices;
    for (int i = 0; i < gpus; ++i) devices.push_back(i);
    const TrainResult cpu = Train(spec, Storage("cpu_" + tag), {});
    const TrainResult gpu = Train(spec, Storage("gpu_" + tag), devices);
    ASSERT_TRUE(cpu.finished);
    ASSERT_TRUE(gpu.finished);
    EXPECT_NEAR(gpu.test_accuracy, cpu.test_accuracy, 0.02);
    ExpectParamsClose(FinalParams(Storage("cpu_" + tag), spec),
                      FinalParams(Storage("gpu_" + tag), spec));
  }
}

TEST(GpuTrainingTest, TwoGpusAgreeWithTwoCpuReplicas) {
  SKIP_WITHOUT_CUDA_DEVICE();
  if (VisibleCount() < 2) {
    GTEST_SKIP() << "needs 2 GPUs; " << VisibleCount() << " visible";
  }
  const JobSpec spec = SmallCnnJob(kSgd, 2);
  const TrainResult cpu = Train(spec, Storage("cpu2"), {});
  const TrainResult gpu = Train(spec, Storage("gpu2"), {0, 1});
  ASSERT_TRUE(cpu.finished);
  ASSERT_TRUE(gpu.finished);
  EXPECT_EQ(gpu.steps, 40);  // 640 samples / (2 x 16) x 2 epochs
  EXPECT_NEAR(gpu.test_accuracy, cpu.test_accuracy, 0.01);
  ExpectParamsClose(FinalParams(Storage("cpu2"), spec),
                    FinalParams(Storage("gpu2"), spec));
  // Every GPU ends with the same bytes: the fingerprint is of cuda:0's
  // parameters, and a second run repeats it.
  const TrainResult again = Train(spec, Storage("gpu2b"), {0, 1});
  EXPECT_EQ(again.fingerprint, gpu.fingerprint);
}

TEST(GpuTrainingTest, MoreGpusThanReplicasIsRefusedNamingBoth) {
  const JobSpec spec = SmallCnnJob(kSgd, 1);
  TrainOptions options;
  options.storage_dir = Storage("refused");
  options.cuda_devices = {0, 1};
  absl::StatusOr<TrainResult> r = RunLocalTraining(spec, options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("2 GPUs for the job's 1 replicas"),
            std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace cuda
}  // namespace lockstep
