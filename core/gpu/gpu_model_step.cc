// GpuModel's whole steps (see gpu_model.h): the loss, a training step
// enqueued on the compute stream, the sync batch norm sums joined, and
// evaluation.
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/gpu/device_loss.h"
#include "core/gpu/gpu_model.h"
#include "core/gpu/gpu_model_internal.h"
#include "kernels/cuda/cuda_status.h"

namespace lockstep {
namespace cuda {

absl::Status GpuModel::ComputeLoss(int64_t n, const float* out,
                                   const Loss& loss, float scale, float* grad) {
  const int64_t rows = n * host_->labels_per_sample();
  const int64_t classes = host_->classes();
  auto* sums = static_cast<DeviceLossSums*>(sums_.ptr);
  if (device_loss_of_ != &loss) {
    device_loss_ = FindDeviceLoss(loss.name);
    device_loss_of_ = &loss;
  }
  if (device_loss_ == nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        "loss ", loss.name, " has no GPU pass; train this job on CPUs"));
  }
  CUDA_RETURN_IF_ERROR(device_loss_->compute(rows, classes, out, in_labels_,
                                             scale, grad, loss_ws_.ptr, sums,
                                             stream_));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(h_->sums.data(), sums,
                                       sizeof(DeviceLossSums),
                                       cudaMemcpyDeviceToHost, stream_));
  return absl::OkStatus();
}

absl::StatusOr<BatchLoss> GpuModel::FinishStep() {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return LossAfterSync();
}

BatchLoss GpuModel::LossAfterSync() const {
  BatchLoss b;
  if (pending_n_ == 0) return b;
  DeviceLossSums s;
  std::memcpy(&s, h_->sums.data(), sizeof(s));
  b.loss_sum = s.loss_sum;
  b.correct = s.correct;
  b.count = s.count;
  return b;
}

absl::StatusOr<BatchLoss> GpuModel::TrainStep(const float* host_x,
                                              const int32_t* host_labels,
                                              int64_t n, const Loss& loss,
                                              float grad_scale,
                                              uint64_t dropout_seed) {
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GpuModel::TrainStep: negative batch ", n));
  }
  ASSIGN_OR_RETURN(StagedInput in, StageInputs(host_x, host_labels, n));
  RETURN_IF_ERROR(EnqueueTrainStep(in, loss, grad_scale, dropout_seed));
  return FinishStep();
}

absl::Status GpuModel::EnqueueTrainStep(const StagedInput& in, const Loss& loss,
                                        float grad_scale,
                                        uint64_t dropout_seed) {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  RETURN_IF_ERROR(UseStaged(in));
  const Graph& g = *graph_;
  const int64_t n = in.n;
  pending_n_ = n;
  InputSlot& slot = *slots_[in.slot];
  // Layers add their parameter gradients (a tied weight gets two).
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(
      grads_dev_, 0, std::max<int64_t>(total_floats_, 1) * sizeof(float),
      stream_));
  for (int p : g.untouched_params()) Ready(p);
  if (n == 0) {
    if (collective_ != nullptr && g.sums_across_replicas()) {
      RETURN_IF_ERROR(JoinPassSums());
    }
    for (const BackwardStep& step : g.backward_plan()) {
      for (int p : step.ready_params) Ready(p);
    }
    CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.consumed, stream_));
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(Reserve(n));
  // As Model: cross-entropy on a softmax output starts from the logits.
  const bool fuse = LossFusesOutputActivation(g, loss);
  ASSIGN_OR_RETURN(const float* out,
                   Forward(n, /*training=*/true, fuse, dropout_seed));
  RETURN_IF_ERROR(
      ComputeLoss(n, out, loss, grad_scale,
                  static_cast<float*>(grads_[g.grad_slot(g.output())].ptr)));
  RETURN_IF_ERROR(Backward(n));
  CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.consumed, stream_));
  return absl::OkStatus();
}

absl::Status GpuModel::JoinPassSums() {
  const Graph& g = *graph_;
  auto join = [&](int i, bool backward) -> absl::Status {
    const GraphNode& gn = g.node(i);
    Node& node = *nodes_[i];
    node.ctx.training = true;
    node.ctx.collective = collective_;
    node.ctx.collective_key = PassCollectiveKey(i);
    node.io.n = 0;
    const absl::Status s =
        (backward ? node.impl->backward : node.impl->forward)(
            *gn.layer, node.state.get(), node.io, node.ctx, h_->dc);
    if (s.ok()) return s;
    return absl::Status(s.code(),
                        absl::StrCat(backward ? "backward" : "forward",
                                     " of layer ", gn.name, ": ", s.message()));
  };
  for (int i = g.num_inputs(); i <= g.output(); ++i) {
    if (g.node(i).frozen || !g.node(i).layer->SumsAcrossReplicas()) continue;
    RETURN_IF_ERROR(join(i, false));
  }
  for (const BackwardStep& step : g.backward_plan()) {
    if (!g.node(step.node).layer->SumsAcrossReplicas()) continue;
    RETURN_IF_ERROR(join(step.node, true));
  }
  return absl::OkStatus();
}

absl::StatusOr<BatchLoss> GpuModel::Evaluate(const float* host_x,
                                             const int32_t* host_labels,
                                             int64_t n, const Loss& loss) {
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GpuModel::Evaluate: negative batch ", n));
  }
  if (n == 0) return BatchLoss();
  ASSIGN_OR_RETURN(StagedInput in, StageInputs(host_x, host_labels, n));
  RETURN_IF_ERROR(UseStaged(in));
  pending_n_ = n;
  RETURN_IF_ERROR(Reserve(n));
  const bool fuse = LossFusesOutputActivation(*graph_, loss);
  ASSIGN_OR_RETURN(const float* out, Forward(n, /*training=*/false, fuse, 0));
  RETURN_IF_ERROR(ComputeLoss(n, out, loss, 0.0f, nullptr));
  CUDA_RETURN_IF_ERROR(cudaEventRecord(slots_[in.slot]->consumed, stream_));
  return FinishStep();
}

}  // namespace cuda
}  // namespace lockstep
