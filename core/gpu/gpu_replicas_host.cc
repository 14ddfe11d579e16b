// The CUDA GpuReplicas's update and its traffic with the host (see
// gpu_replicas_internal.h): each GPU's DeviceOptimizer
// (core/train/optimizer_cuda.h) at the step's count and loss scale, the
// ring layout's gradient sum through pinned host memory, and the
// parameters and optimizer state between the GPUs and the host.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/gpu/gpu_replicas_internal.h"
#include "core/train/optimizer.h"
#include "kernels/cuda/layers/batch_norm.h"
#include "kernels/cuda/optimizer.h"

namespace lockstep {
namespace cuda {

FlatLayout LayoutOf(const GpuModel& model) {
  FlatLayout layout;
  for (int i = 0; i < model.num_params(); ++i) {
    layout.offsets.push_back(model.param_offset(i));
    layout.sizes.push_back(model.param_size(i));
  }
  layout.floats = model.flat_floats();
  return layout;
}

absl::Status CudaGpuReplicas::PullState(const std::vector<Param*>& params,
                                        Optimizer& optimizer) {
  // After Abort the state a rank keeps for a rejoin, when intact.
  if (!StateIntact()) RETURN_IF_ERROR(Usable());
  const Lane& lane = lanes_[0];
  RETURN_IF_ERROR(AnnotateStatus(
      lane.model->CopyParamsToHost(params),
      absl::StrCat("pulling the parameters from ", Where(lane))));
  ASSIGN_OR_RETURN(std::vector<Tensor*> states, MatchState(params, optimizer));
  RETURN_IF_ERROR(AnnotateStatus(
      lane.optimizer->Pull(states, lane.model->stream()),
      absl::StrCat("pulling the optimizer state from ", Where(lane))));
  optimizer.set_iterations(iterations_);
  return absl::OkStatus();
}

absl::Status CudaGpuReplicas::PushState(const std::vector<Param*>& params,
                                        Optimizer& optimizer) {
  RETURN_IF_ERROR(Usable());
  ASSIGN_OR_RETURN(std::vector<Tensor*> states, MatchState(params, optimizer));
  for (Lane& lane : lanes_) {
    const std::string where =
        absl::StrCat("pushing the state to ", Where(lane));
    RETURN_IF_ERROR(
        AnnotateStatus(lane.model->CopyParamsFromHost(params), where));
    RETURN_IF_ERROR(AnnotateStatus(
        lane.optimizer->Push(states, lane.model->stream()), where));
  }
  iterations_ = optimizer.iterations();
  return absl::OkStatus();
}

absl::Status CudaGpuReplicas::Update(Lane& lane, double lr,
                                     int64_t global_samples) {
  GpuModel& model = *lane.model;
  return lane.optimizer->Update(lr, iterations_, loss_scale_.unscale(),
                                loss_scale_.enabled(), global_samples,
                                model.device_params(), model.device_grads(),
                                model.stream());
}

absl::StatusOr<std::vector<Tensor*>> CudaGpuReplicas::MatchState(
    const std::vector<Param*>& params, Optimizer& optimizer) const {
  const GpuModel& m0 = *lanes_[0].model;
  if (static_cast<int>(params.size()) != m0.num_params()) {
    return absl::InvalidArgumentError(
        absl::StrCat("GpuReplicas: ", params.size(),
                     " params given, the model has ", m0.num_params()));
  }
  return lanes_[0].optimizer->Match(optimizer);
}

absl::Status CudaGpuReplicas::SumToHost(Lane& lane, int64_t step) {
  const GpuModel& model = *lane.model;
  const absl::Status s =
      CUDA_STATUS(cudaMemcpyAsync(host_sum_.data(), model.device_grads(),
                                  model.flat_floats() * sizeof(float),
                                  cudaMemcpyDeviceToHost, model.stream()));
  return AnnotateStatus(s, absl::StrCat("copying step ", step,
                                        "'s gradients from ", Where(lane)));
}

absl::Status CudaGpuReplicas::LaneApplyHostSum(Lane& lane, int64_t step,
                                               double lr,
                                               int64_t global_samples) {
  GpuModel& model = *lane.model;
  CUDA_RETURN_IF_ERROR(cudaSetDevice(model.device()));
  const absl::Status s =
      CUDA_STATUS(cudaMemcpyAsync(model.device_grads(), host_sum_.data(),
                                  model.flat_floats() * sizeof(float),
                                  cudaMemcpyHostToDevice, model.stream()));
  RETURN_IF_ERROR(
      AnnotateStatus(s, absl::StrCat("copying step ", step,
                                     "'s summed gradients to ", Where(lane))));
  return LaneFinish(lane, step, &lr, global_samples);
}

}  // namespace cuda
}  // namespace lockstep
