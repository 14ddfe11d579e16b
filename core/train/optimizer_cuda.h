// The optimizer on a GPU, beside the CPU's (optimizer.h) as a layer's CUDA
// pass is beside its CPU one (core/layers/*_cuda.cc): the state of one
// GPU model's flat parameter buffer (momentum, Adam's m and v, in
// GpuModel's layout) and the step, through kernels/cuda/optimizer.h's fused
// kernels with Optimizer::Apply's math element for element (one launch for
// every run of the buffer, the global norm in two). The learning rate and
// the options are the OptimizerSpec's, checked once by Optimizer::Create.
// Built only under --config=cuda; GpuReplicas holds one per GPU.
#ifndef LOCKSTEP_CORE_TRAIN_OPTIMIZER_CUDA_H_
#define LOCKSTEP_CORE_TRAIN_OPTIMIZER_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/job/job_spec.h"
#include "core/tensor.h"
#include "core/train/optimizer.h"
#include "kernels/cuda/cuda_memory.h"
#include "kernels/cuda/optimizer.h"

namespace lockstep {
namespace cuda {

// Where a model's params lie in its flat device buffers (GpuModel's: each
// param at its offset, in floats, padded; `floats` in all).
struct FlatLayout {
  std::vector<int64_t> offsets;
  std::vector<int64_t> sizes;
  int64_t floats = 0;
};

// A run of the flat buffers whose params are updated alike: [begin, end)
// in floats, padding included.
struct UpdateRun {
  ParamUpdate update = ParamUpdate::kOptimizer;
  float momentum = 0;  // kMovingAverage
  bool decay = false;  // kOptimizer: weight decay applies (DecaysWeights)
  int64_t begin = 0, end = 0;
};

// The params as runs of one update kind and weight decay (one run, the
// whole buffer, for a model whose params all belong to the optimizer and
// decay alike).
std::vector<UpdateRun> UpdateRuns(const std::vector<Param*>& params,
                                  const FlatLayout& layout,
                                  const OptimizerSpec& spec);
// The runs as the update kernels read them (kernels/cuda/optimizer.h).
std::vector<FlatRun> FlatRuns(const std::vector<UpdateRun>& runs);
// How many runs belong to the optimizer.
int OptimizerRuns(const std::vector<UpdateRun>& runs);
// The slots a param of the optimizer has: SGD's momentum (if any), Adam's
// m and v.
int SlotCount(const OptimizerSpec& spec);
// The indices of the params the optimizer updates (and keeps state for):
// every one but batch norm's running statistics and frozen layers'.
std::vector<int> OptimizerParams(const std::vector<Param*>& params);
// Optimizer::StateTensors' names for `params`, in its order.
std::vector<std::string> SlotNames(const OptimizerSpec& spec,
                                   const std::vector<Param*>& params);

class DeviceOptimizer {
 public:
  // The slots (zero) and update runs for `params` laid out as `layout`, on
  // `device`; with `norm` (global_clipnorm, or fp16's overflow test) the
  // global norm's buffers too. Blocks. Errors: CUDA's (out of memory).
  static absl::StatusOr<std::unique_ptr<DeviceOptimizer>> Create(
      int device, const OptimizerSpec& spec, const std::vector<Param*>& params,
      const FlatLayout& layout, bool norm);

  // Enqueues on `stream` one step of the flat parameters w from the summed
  // gradients g (layout's): the global norm first when kept, then SGD or
  // Adam over every optimizer run at `lr` (Adam's bias correction from
  // `iterations`, Optimizer::iterations() before the step), g multiplied by
  // `unscale` first and, with `skip_nonfinite`, the whole update skipped
  // when the gradients overflowed (kernels/cuda/overflow.h; fp16's loss
  // scaling: FailedPrecondition for a DeviceOptimizer created without
  // `norm`); then batch norm's moving averages (1 / global_samples; none
  // for 0, nor on a skipped step). Frozen params are left alone; padding
  // gets updates nothing reads.
  absl::Status Update(double lr, int64_t iterations, float unscale,
                      bool skip_nonfinite, int64_t global_samples, float* w,
                      const float* g, cudaStream_t stream);

  // After the step's wait: whether every summed gradient of the
  // optimizer's params was finite, unscaled by the last Update's `unscale`
  // too (not GradientsOverflowed, kernels/cuda/overflow.h: the kernels'
  // own test; true without a norm).
  absl::StatusOr<bool> GradientsFinite() const;

  // The optimizer's StateTensors, checked against these slots (names,
  // order and sizes): what Pull fills and Push reads.
  absl::StatusOr<std::vector<Tensor*>> Match(Optimizer& optimizer) const;
  // The slots into `states` (Match's), after the work on `stream`; blocks.
  absl::Status Pull(const std::vector<Tensor*>& states,
                    cudaStream_t stream) const;
  // `states` (Match's) into the slots, zero padding; blocks.
  absl::Status Push(const std::vector<Tensor*>& states, cudaStream_t stream);

 private:
  DeviceOptimizer() = default;
  // A whole slot between the host and the device, after the work on
  // `stream`; blocks.
  absl::Status Copy(void* dst, const void* src, cudaMemcpyKind kind,
                    cudaStream_t stream) const;

  OptimizerSpec spec_;
  int device_ = 0;
  FlatLayout layout_;
  std::vector<int> params_;         // OptimizerParams
  std::vector<std::string> names_;  // SlotNames
  std::vector<UpdateRun> runs_;
  int optimizer_runs_ = 0;
  std::unique_ptr<DeviceBuffer<float>> first_;   // momentum or m; or null
  std::unique_ptr<DeviceBuffer<float>> second_;  // Adam's v; or null
  // The partial sums of squares (kNormBlocks), then the total; or null.
  std::unique_ptr<DeviceBuffer<double>> norm_;
  float last_unscale_ = 1.0f;  // the last Update's
  std::unique_ptr<DeviceBuffer<FlatRun>> flat_runs_;
};

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_TRAIN_OPTIMIZER_CUDA_H_
