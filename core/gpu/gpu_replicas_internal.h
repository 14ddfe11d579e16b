// The CUDA build's GpuReplicas (see core/train/gpu_replicas.h):
// its lanes (one local GPU each, with its DeviceOptimizer:
// core/train/optimizer_cuda.h) and the class itself, shared by
// gpu_replicas_cuda.cc (the step, evaluation) and gpu_replicas_host.cc
// (the update and what crosses to the host). Include nowhere else.
#ifndef LOCKSTEP_CORE_GPU_GPU_REPLICAS_INTERNAL_H_
#define LOCKSTEP_CORE_GPU_GPU_REPLICAS_INTERNAL_H_

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/collective/replica_sum.h"
#include "core/gpu/gpu_model.h"
#include "core/gpu/gpu_replicas_cuda.h"
#include "core/step_pool.h"
#include "core/train/optimizer_cuda.h"
#include "kernels/cuda/cuda_memory.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/nccl_communicator.h"

namespace lockstep {
namespace cuda {

// One local GPU. Members are destroyed bottom-up: the communicator before
// the buffers its pending work might touch.
struct Lane {
  int64_t replica = 0;  // global replica index = NCCL rank
  std::unique_ptr<GpuModel> model;
  // The batch staged for global step `staged_step` (-1: none).
  GpuModel::StagedInput staged;
  int64_t staged_step = -1;
  // The optimizer's slots, runs and norm on this GPU.
  std::unique_ptr<DeviceOptimizer> optimizer;
  // Gradient accumulation: the step's earlier micro-batches' gradients,
  // added up (flat layout); null with one micro-batch a step.
  std::unique_ptr<DeviceBuffer<float>> kept;
  std::unique_ptr<NcclCommunicator> comm;
};

// GpuModel's flat layout, for its DeviceOptimizer.
FlatLayout LayoutOf(const GpuModel& model);

class CudaGpuReplicas final : public GpuReplicas {
 public:
  CudaGpuReplicas(const GpuReplicasConfig& config, std::vector<Lane> lanes,
                  PinnedHostBuffer host_sum);

  absl::StatusOr<BatchLoss> Step(Batch& batch, const Batch* next,
                                 const Loss& loss, uint64_t seed,
                                 double lr) override;

  absl::StatusOr<BatchLoss> Evaluate(const Dataset& data,
                                     const Loss& loss) override;

  absl::Status PullState(const std::vector<Param*>& params,
                         Optimizer& optimizer) override;

  absl::Status PushState(const std::vector<Param*>& params,
                         Optimizer& optimizer) override;

  LossScaleState loss_scale() const override { return loss_scale_.state(); }
  void RestoreLossScale(const LossScaleState& state) override {
    loss_scale_.Restore(state);
  }
  bool StateIntact() const override { return !updating_.load(); }

  void Abort() override;

 private:
  static absl::Status Cancelled();
  absl::Status Usable() const;
  // Thread-safe: lanes_ never changes after construction.
  void AbortCommunicators();
  std::string Where(const Lane& lane) const;

  // Copies one replica batch toward lane's GPU (GpuModel::StageInputs).
  absl::StatusOr<GpuModel::StagedInput> Stage(Lane& lane,
                                              const ReplicaBatch& rb,
                                              int64_t step);

  // One GPU's forward/backward and NCCL sum, enqueued on its stream (a
  // StepPool lane); the next batch's copy runs beside them on the copy
  // stream.
  // With micro-batches (micros_ > 1, `micro` the step's, rb unused and
  // no next), each but the last runs and waits in turn, its gradients
  // added to lane.kept and its loss to *earlier; the last's gradients get
  // the kept sum added before the NCCL sum.
  absl::Status LaneCompute(Lane& lane, ReplicaBatch& rb, int64_t step,
                           const ReplicaBatch* next, int64_t next_step,
                           const Loss& loss, float scale, uint64_t seed,
                           const std::vector<Batch>& micro, int index,
                           BatchLoss* earlier);

  // Enqueues the update at `*lr` (none when null), then waits for the
  // lane's stream: the step's end, the all-reduce's included, so a peer
  // that is gone shows as an NCCL error here, not as a hang.
  absl::Status LaneFinish(Lane& lane, int64_t step, const double* lr,
                          int64_t global_samples);

  // The ring layout: lane's summed gradients into host_sum_ (enqueued).
  absl::Status SumToHost(Lane& lane, int64_t step);

  // The ring layout: the workers' sum from host_sum_ onto lane's GPU, the
  // update, and a wait.
  absl::Status LaneApplyHostSum(Lane& lane, int64_t step, double lr,
                                int64_t global_samples);

  // The lanes' losses summed, or the first real error (not the lanes
  // cancelled because of it).
  static absl::StatusOr<BatchLoss> Sum(
      const std::vector<absl::StatusOr<BatchLoss>>& losses);

  // Enqueues lane's update (DeviceOptimizer::Update at this step's count
  // and loss scale).
  absl::Status Update(Lane& lane, double lr, int64_t global_samples);

  // `params` and the optimizer's StateTensors, checked against the
  // devices' (the params' count; names, order and sizes of the state).
  absl::StatusOr<std::vector<Tensor*>> MatchState(
      const std::vector<Param*>& params, Optimizer& optimizer) const;

  const OptimizerSpec optimizer_;
  const int64_t world_;
  const int32_t micros_;      // micro-batches a step (gradient accumulation)
  const int64_t micro_size_;  // samples of a replica's micro-batch
  const std::function<absl::Status(int64_t, float*, int64_t)> host_all_reduce_;
  std::vector<Lane> lanes_;
  StepPool pool_;
  PinnedHostBuffer host_sum_;  // the ring layout's staging: flat_floats()
  int64_t iterations_ = 0;  // Optimizer::iterations() of the device state
  LossScale loss_scale_;    // enabled for precision "fp16"
  std::atomic<bool> aborted_{false};
  const bool keep_state_;  // GpuReplicasConfig::keep_state
  // Set once a lane enqueues the step's update, cleared when the step
  // ends well: StateIntact() after a failure.
  std::atomic<bool> updating_{false};
  absl::Status broken_;  // a failed step's error: every later Step's
  // Set when the model sums across replicas in its passes.
  const std::function<absl::Status(int64_t, int32_t, float*, int64_t)>
      pass_sum_fn_;
  std::unique_ptr<ReplicaSum> pass_sum_;
};

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_GPU_GPU_REPLICAS_INTERNAL_H_
