// Times Model::TrainStep on the models of benchmarks/train_vs_pytorch.sh
// (MNIST MLP 784-256-256-10 and the small CNN), batch 64, or on
// mobilenet_v2, so kernel changes can be measured without the trainer or the
// data set.
//   bazel run -c opt //core:model_benchmark -- [threads] [steps]
//   bazel run -c opt //core:model_benchmark -- THREADS STEPS mobilenet_v2 \
//       ALPHA SIZE BATCH [frozen | top]
// (top: the preset with its own classifier, 10 classes: torchvision's
// mobilenet_v2(num_classes=10), the native peer of an exported one)
//   bazel run -c opt //core:model_benchmark -- THREADS STEPS onnx PATH BATCH
// (a graph exported from torch, imported as a job's "model": {"onnx"}: the
// peer of benchmarks/onnx_vs_torch.sh; 10 or more classes)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

#include <string>

#include "absl/strings/str_format.h"
#include "core/job/job_spec.h"
#include "core/model/model.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

void Run(const char* label, const ModelSpec& spec, int steps,
         int64_t batch = 64, int warmup = 20) {
  std::unique_ptr<Model> m = *Model::Build(spec, 1);
  Shape shape = m->input_shape();
  shape.insert(shape.begin(), batch);
  Tensor x(shape);
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> d(0, 1);
  for (float& v : x.values()) v = d(gen);
  std::vector<int32_t> y(batch);
  for (int64_t i = 0; i < batch; ++i) y[i] = i % 10;
  auto step = [&](int s) {
    m->TrainStep(x, y.data(), LossNamed("sparse_categorical_crossentropy"),
                 1.0f / batch, s);
    for (Param* p : m->params()) {
      float* v = p->value.data();
      const float* g = p->grad.data();
      for (int64_t i = 0; i < p->value.size(); ++i) v[i] -= 0.01f * g[i];
    }
  };
  for (int s = 0; s < warmup; ++s) step(s);
  const auto t0 = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) step(s);
  const double sec =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  std::printf("%-12s threads=%d  %.3f ms/step  %.0f samples/s\n", label,
              NumThreads(), 1e3 * sec / steps, steps * batch / sec);
}

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) {
  using namespace lockstep;
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 300;
  SetNumThreads(threads);
  if (argc > 7 && std::string(argv[3]) == "mobilenet_v2" &&
      std::string(argv[7]) == "top") {
    const std::string json = absl::StrFormat(
        R"({"input_shape": [%s, %s, 3], "param_names": "torch", "layers": [
          {"type": "mobilenet_v2", "alpha": %s, "include_top": true,
           "classes": 10}]})",
        argv[5], argv[5], argv[4]);
    absl::StatusOr<ModelSpec> spec = ParseModelSpec(json);
    if (!spec.ok()) {
      std::fprintf(stderr, "%s\n", spec.status().ToString().c_str());
      return 1;
    }
    Run("mnv2 top", *spec, steps, std::atoi(argv[6]), 2);
    return 0;
  }
  if (argc > 6 && std::string(argv[3]) == "mobilenet_v2") {
    // The base, then the seed's head (GAP, dense 512, one logit per class).
    const bool frozen = argc > 7 && std::string(argv[7]) == "frozen";
    const std::string json = absl::StrFormat(
        R"({"input_shape": [%s, %s, 3], "param_names": "torch", "layers": [
          {"type": "mobilenet_v2", "alpha": %s, "include_top": false,
           "trainable": %s},
          {"type": "global_average_pooling2d", "name": "pool"},
          {"type": "dense", "name": "fc", "units": 512, "activation": "relu"},
          {"type": "dense", "name": "out", "units": 10}]})",
        argv[5], argv[5], argv[4], frozen ? "false" : "true");
    absl::StatusOr<ModelSpec> spec = ParseModelSpec(json);
    if (!spec.ok()) {
      std::fprintf(stderr, "%s\n", spec.status().ToString().c_str());
      return 1;
    }
    Run(frozen ? "mnv2 frozen" : "mnv2", *spec, steps, std::atoi(argv[6]), 2);
    return 0;
  }
  if (argc > 5 && std::string(argv[3]) == "onnx") {
    ModelSpec spec;
    spec.onnx_path = argv[4];
    spec.inputs.push_back(ModelInput{"input", {}});
    spec.param_names = ParamNaming::kTorch;
    absl::StatusOr<std::unique_ptr<Model>> probe = Model::Build(spec, 1);
    if (!probe.ok()) {
      std::fprintf(stderr, "%s\n", probe.status().ToString().c_str());
      return 1;
    }
    probe->reset();
    Run("onnx", spec, steps, std::atoi(argv[5]), 2);
    return 0;
  }
  const ModelSpec mlp = *ParseModelSpec(R"({"input_shape": [784], "layers": [
      {"type": "dense", "units": 256, "activation": "relu"},
      {"type": "dense", "units": 256, "activation": "relu"},
      {"type": "dense", "units": 10}]})");
  const ModelSpec cnn = *ParseModelSpec(R"({"input_shape": [28, 28, 1],
      "layers": [
      {"type": "conv2d", "filters": 32, "kernel_size": 3, "activation": "relu"},
      {"type": "max_pool2d"}, {"type": "flatten"},
      {"type": "dense", "units": 64, "activation": "relu"},
      {"type": "dense", "units": 10}]})");
  Run("mlp", mlp, steps);
  Run("cnn", cnn, steps);
  return 0;
}
