// GPU replicas and the backend registration (see gpu_replica.h).
#include "kernels/cuda/layers/gpu_replica.h"

#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/layers/gpu_model.h"

namespace lockstep {
namespace cuda {
namespace {

class GpuReplica final : public Replica {
 public:
  GpuReplica(std::unique_ptr<Model> host, std::unique_ptr<GpuModel> gpu)
      : host_(std::move(host)), gpu_(std::move(gpu)) {}

  Model& host() override { return *host_; }
  std::string device() const override {
    return absl::StrCat("cuda:", gpu_->device());
  }

  absl::StatusOr<BatchLoss> TrainStep(const Tensor& x, const int32_t* labels,
                                      LossType loss, float grad_scale,
                                      uint64_t dropout_seed) override {
    RETURN_IF_ERROR(BindDevice());
    const int64_t n = x.shape().empty() ? 0 : x.dim(0);
    ASSIGN_OR_RETURN(
        BatchLoss result,
        gpu_->TrainStep(x.data(), labels, n, loss, grad_scale, dropout_seed));
    std::vector<Param*> params = host_->params();
    RETURN_IF_ERROR(gpu_->CopyGradsToHost(params));
    // The host gradients are final only now, all at once: announce them in
    // backward order (last layer first), as the CPU model does.
    if (grad_ready_) {
      for (int i = static_cast<int>(params.size()) - 1; i >= 0; --i) {
        grad_ready_(i);
      }
    }
    return result;
  }

  absl::StatusOr<BatchLoss> Evaluate(const Tensor& x, const int32_t* labels,
                                     LossType loss) override {
    RETURN_IF_ERROR(BindDevice());
    const int64_t n = x.shape().empty() ? 0 : x.dim(0);
    return gpu_->Evaluate(x.data(), labels, n, loss);
  }

  absl::Status ParamsChanged() override {
    RETURN_IF_ERROR(BindDevice());
    return gpu_->CopyParamsFromHost(host_->params());
  }

  void SetGradReadyCallback(std::function<void(int)> cb) override {
    grad_ready_ = std::move(cb);
  }

 private:
  // The lane thread that drives this replica may differ from the one that
  // created it: make its device current.
  absl::Status BindDevice() {
    const cudaError_t e = cudaSetDevice(gpu_->device());
    if (e != cudaSuccess) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cudaSetDevice(", gpu_->device(), "): ", cudaGetErrorString(e)));
    }
    return absl::OkStatus();
  }

  std::unique_ptr<Model> host_;
  std::unique_ptr<GpuModel> gpu_;
  std::function<void(int)> grad_ready_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Replica>> MakeGpuReplica(const JobSpec& spec,
                                                        int device) {
  ASSIGN_OR_RETURN(std::unique_ptr<Model> host,
                   Model::Build(spec.model, spec.seed));
  GpuModelOptions options;
  options.device = device;
  options.allow_tf32 = spec.cluster.allow_tf32;
  absl::StatusOr<std::unique_ptr<GpuModel>> gpu =
      GpuModel::Create(spec.model, spec.seed, options);
  if (!gpu.ok()) {
    return AnnotateStatus(gpu.status(), absl::StrCat("cuda:", device));
  }
  return std::unique_ptr<Replica>(
      new GpuReplica(std::move(host), *std::move(gpu)));
}

}  // namespace cuda
}  // namespace lockstep
