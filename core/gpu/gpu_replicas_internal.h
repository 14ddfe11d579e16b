// The CUDA build's GpuReplicas (see core/train/gpu_replicas.h):
// its lanes (one local GPU each), the optimizer slots on them and the
// class itself, shared by gpu_replicas_cuda.cc (the step, evaluation)
// and gpu_replicas_host.cc (the update and what crosses to the
// host). Include nowhere else.
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
#include "kernels/cuda/cuda_memory.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/nccl_communicator.h"
#include "kernels/cuda/optimizer.h"

namespace lockstep {
namespace cuda {

// A zeroed buffer of T on one GPU. As floats laid out like GpuModel's flat
// buffers: one optimizer slot (momentum, m or v) for every parameter.
template <typename T>
class DeviceBuffer {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceBuffer>> Create(int device,
                                                              int64_t count) {
    CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
    std::unique_ptr<DeviceBuffer> buffer(new DeviceBuffer(device));
    const size_t bytes = std::max<int64_t>(count, 1) * sizeof(T);
    void* p = nullptr;
    CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes));
    buffer->ptr_ = static_cast<T*>(p);
    CUDA_RETURN_IF_ERROR(cudaMemset(buffer->ptr_, 0, bytes));
    return buffer;
  }
  ~DeviceBuffer() {
    if (ptr_ == nullptr) return;
    cudaSetDevice(device_);
    cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return ptr_; }

 private:
  explicit DeviceBuffer(int device) : device_(device) {}
  const int device_;
  T* ptr_ = nullptr;
};

using DeviceSlot = DeviceBuffer<float>;

// One local GPU. Members are destroyed bottom-up: the communicator before
// the buffers its pending work might touch.
struct Lane {
  int64_t replica = 0;  // global replica index = NCCL rank
  std::unique_ptr<GpuModel> model;
  // The batch staged for global step `staged_step` (-1: none).
  GpuModel::StagedInput staged;
  int64_t staged_step = -1;
  std::unique_ptr<DeviceSlot> first;   // SGD momentum or Adam m; null if none
  std::unique_ptr<DeviceSlot> second;  // Adam v; null if none
  // Gradient accumulation: the step's earlier micro-batches' gradients,
  // added up (flat layout); null with one micro-batch a step.
  std::unique_ptr<DeviceSlot> kept;
  // The partial sums of squares of the summed gradients (kNormBlocks),
  // then the total: global_clipnorm's norm and fp16's overflow test; null
  // without either.
  std::unique_ptr<DeviceBuffer<double>> norm;
  // The update runs (FlatRuns of CudaGpuReplicas::runs_) on this GPU.
  std::unique_ptr<DeviceBuffer<FlatRun>> runs;
  std::unique_ptr<NcclCommunicator> comm;
};

// A run of the flat buffers whose params are updated alike: [begin, end)
// in floats, padding included.
struct UpdateRun {
  ParamUpdate update = ParamUpdate::kOptimizer;
  float momentum = 0;  // kMovingAverage
  bool decay = false;  // kOptimizer: weight decay applies (DecaysWeights)
  int64_t begin = 0, end = 0;
};

// The runs as the update kernels read them (kernels/cuda/optimizer.h).
std::vector<FlatRun> FlatRuns(const std::vector<UpdateRun>& runs);

int SlotCount(const OptimizerSpec& spec);

// The indices of the params the optimizer updates (and keeps state for):
// every one but batch norm's running statistics and frozen layers'.
std::vector<int> OptimizerParams(const std::vector<Param*>& params);

// The model's params as runs of one update kind and weight decay (one run,
// the whole buffer, for a model whose params all belong to the optimizer
// and decay alike).
std::vector<UpdateRun> UpdateRuns(const GpuModel& model,
                                  const OptimizerSpec& spec);

// How many runs belong to the optimizer.
int OptimizerRuns(const std::vector<UpdateRun>& runs);

// Optimizer::StateTensors' names for `params`, in its order.
std::vector<std::string> SlotNames(const OptimizerSpec& spec,
                                   const std::vector<Param*>& all);

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

  // Enqueues the updates: SGD/Adam/AdamW over every run of the optimizer's
  // params in one launch (and the clipping norm in two), the math
  // elementwise, so this equals core/train/optimizer.cc's per-param loops on
  // every real element, and the padding, gradient and slots zero, updates
  // to values nothing reads; the moving averages of batch norm's statistics
  // (UpdateMovingAverages' math), one launch a run; nothing for frozen
  // params.
  absl::Status Update(Lane& lane, double lr, int64_t global_samples);

  // Loss scaling: whether lane's summed gradients were all finite (its
  // norm's sum of squares, read after the step's wait).
  absl::StatusOr<bool> GradientsFinite(const Lane& lane) const;

  // The optimizer's StateTensors, checked against this optimizer's slots
  // for `params` (names, order and sizes).
  absl::StatusOr<std::vector<Tensor*>> MatchState(
      const std::vector<Param*>& params, Optimizer& optimizer) const;

  // A whole flat buffer between the host and lane's GPU, ordered after the
  // work on its stream; blocks.
  static absl::Status Copy(const Lane& lane, void* dst, const void* src,
                           cudaMemcpyKind kind);

  const OptimizerSpec optimizer_;
  const int64_t world_;
  const int32_t micros_;      // micro-batches a step (gradient accumulation)
  const int64_t micro_size_;  // samples of a replica's micro-batch
  const std::function<absl::Status(int64_t, float*, int64_t)> host_all_reduce_;
  std::vector<Lane> lanes_;
  StepPool pool_;
  PinnedHostBuffer host_sum_;  // the ring layout's staging: flat_floats()
  const std::vector<UpdateRun> runs_;  // how each part of the buffers updates
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
