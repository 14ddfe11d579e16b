// CPU replicas and the GPU replica factory hook (see replica.h).
#include "core/replica.h"

#include <mutex>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace lockstep {
namespace {

class CpuReplica final : public Replica {
 public:
  explicit CpuReplica(std::unique_ptr<Model> model)
      : model_(std::move(model)) {}
  Model& host() override { return *model_; }
  std::string device() const override { return "cpu"; }
  absl::StatusOr<BatchLoss> TrainStep(const Tensor& x, const int32_t* labels,
                                      LossType loss, float grad_scale,
                                      uint64_t dropout_seed) override {
    return model_->TrainStep(x, labels, loss, grad_scale, dropout_seed);
  }
  absl::StatusOr<BatchLoss> Evaluate(const Tensor& x, const int32_t* labels,
                                     LossType loss) override {
    return model_->Evaluate(x, labels, loss);
  }
  absl::Status ParamsChanged() override { return absl::OkStatus(); }
  void SetGradReadyCallback(std::function<void(int)> cb) override {
    model_->SetGradReadyCallback(std::move(cb));
  }

 private:
  std::unique_ptr<Model> model_;
};

std::mutex& FactoryMutex() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}

GpuBackend& Backend() {
  static GpuBackend* b = new GpuBackend;
  return *b;
}

constexpr char kNoGpuBuild[] =
    "this lockstep was built without GPU support (build it with "
    "--config=cuda); use cpu:N";

}  // namespace

absl::StatusOr<std::unique_ptr<Replica>> MakeCpuReplica(const JobSpec& spec) {
  ASSIGN_OR_RETURN(std::unique_ptr<Model> m,
                   Model::Build(spec.model, spec.seed));
  return std::unique_ptr<Replica>(new CpuReplica(std::move(m)));
}

void RegisterGpuBackend(GpuBackend backend) {
  std::lock_guard<std::mutex> lock(FactoryMutex());
  Backend() = std::move(backend);
}

bool HaveGpuReplicas() {
  std::lock_guard<std::mutex> lock(FactoryMutex());
  return static_cast<bool>(Backend().make_replica);
}

absl::StatusOr<int> VisibleGpus() {
  std::function<absl::StatusOr<int>()> count;
  {
    std::lock_guard<std::mutex> lock(FactoryMutex());
    count = Backend().visible_devices;
  }
  if (!count) return absl::FailedPreconditionError(kNoGpuBuild);
  return count();
}

absl::StatusOr<std::unique_ptr<Replica>> MakeGpuReplica(const JobSpec& spec,
                                                        int device) {
  GpuReplicaFactory factory;
  {
    std::lock_guard<std::mutex> lock(FactoryMutex());
    factory = Backend().make_replica;
  }
  if (!factory) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuda:", device, ": ", kNoGpuBuild));
  }
  return factory(spec, device);
}

}  // namespace lockstep
