// CPU replicas (see replica.h).
#include "core/train/replica.h"

#include "base/status_macros.h"

namespace lockstep {
namespace {

class CpuReplica final : public Replica {
 public:
  explicit CpuReplica(std::unique_ptr<Model> model)
      : model_(std::move(model)) {}
  Model& host() override { return *model_; }
  std::string device() const override { return "cpu"; }
  absl::StatusOr<BatchLoss> TrainStep(const Tensor& x, const int32_t* labels,
                                      const Loss& loss, float grad_scale,
                                      uint64_t dropout_seed) override {
    return model_->TrainStep(x, labels, loss, grad_scale, dropout_seed);
  }
  absl::StatusOr<BatchLoss> Evaluate(const Tensor& x, const int32_t* labels,
                                     const Loss& loss) override {
    return model_->Evaluate(x, labels, loss);
  }
  absl::Status ParamsChanged() override { return absl::OkStatus(); }
  void SetGradReadyCallback(std::function<void(int)> cb) override {
    model_->SetGradReadyCallback(std::move(cb));
  }

 private:
  std::unique_ptr<Model> model_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Replica>> MakeCpuReplica(const JobSpec& spec) {
  ASSIGN_OR_RETURN(std::unique_ptr<Model> m,
                   Model::Build(spec.model, spec.seed));
  m->SetPrecision(spec.precision == Precision::kBf16 ? GemmPrecision::kBf16
                                                     : GemmPrecision::kFp32);
  return std::unique_ptr<Replica>(new CpuReplica(std::move(m)));
}

}  // namespace lockstep
