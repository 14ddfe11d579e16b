// One model replica on one GPU: the graph of core/model/model.h's Model (built
// from the same ModelSpec and seed, so the initial parameters are the same
// bytes) run through each layer's CUDA implementation
// (core/layers/device_layer.h) on one CUDA stream, following the same
// backward plan. Parameters and gradients live on the device in two flat
// buffers; activations and scratch come from a caching allocator, grown to
// the largest batch seen and reused. Not thread-safe: one thread per
// GpuModel at a time.
#ifndef LOCKSTEP_CORE_GPU_GPU_MODEL_H_
#define LOCKSTEP_CORE_GPU_GPU_MODEL_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/gpu/device_loss.h"
#include "core/job/job_spec.h"
#include "core/model/graph.h"
#include "core/model/model.h"
#include "core/tensor.h"
#include "kernels/cuda/elementwise.h"

namespace lockstep {
namespace cuda {

struct GpuModelOptions {
  int device = 0;  // cuda:N
  // TF32 tensor cores for the dense GEMMs and convolutions (~1e-3 relative
  // error). Off: FP32 throughout, within ~1e-5 of the CPU Model.
  bool allow_tf32 = false;
  // A job's 16-bit precision (docs/precision.md): every matrix product's
  // and convolution's inputs rounded to bfloat16 or half, the products on
  // tensor cores, sums and everything else float32.
  InputRounding inputs = InputRounding::kNone;
};

class GpuModel {
 public:
  // Builds the CPU Model (same validation and errors, same initial
  // parameters), then the device state, and copies the parameters over.
  // Blocks. kFailedPrecondition naming the problem when the device is not
  // usable ("GpuModel: no usable CUDA device: ..."), kInvalidArgument for a
  // bad spec or device index.
  static absl::StatusOr<std::unique_ptr<GpuModel>> Create(
      const ModelSpec& spec, uint64_t seed,
      const GpuModelOptions& options = {});
  ~GpuModel();
  GpuModel(const GpuModel&) = delete;
  GpuModel& operator=(const GpuModel&) = delete;

  // The CPU model built at Create: shapes, parameter names and the initial
  // values (not updated by the GPU's steps; see CopyGradsToHost).
  const Model& host_model() const { return *host_; }
  const Shape& input_shape() const { return host_->input_shape(); }
  const Shape& output_shape() const { return host_->output_shape(); }
  int64_t labels_per_sample() const { return host_->labels_per_sample(); }
  int num_params() const { return static_cast<int>(offsets_.size()); }
  int64_t num_parameters() const { return host_->num_parameters(); }
  int device() const { return device_; }
  // The stream every step's work is enqueued on.
  cudaStream_t stream() const { return stream_; }
  // Device pointers to param i's value and gradient (floats, param order of
  // Model::params()); valid for the GpuModel's life. For collectives that
  // work on the device (all-reduce the gradients in place on stream()).
  float* device_param(int i) const { return params_dev_ + offsets_[i]; }
  float* device_grad(int i) const { return grads_dev_ + offsets_[i]; }
  // The two flat buffers behind device_param(0) / device_grad(0): every param
  // at its offset, each padded to 64 floats; flat_floats() floats each. The
  // gradient padding stays zero; the parameter padding is unspecified (never
  // read). For whole-buffer collectives and elementwise optimizer updates.
  float* device_params() const { return params_dev_; }
  float* device_grads() const { return grads_dev_; }
  int64_t flat_floats() const { return total_floats_; }
  int64_t param_offset(int i) const { return offsets_[i]; }  // in floats
  int64_t param_size(int i) const { return sizes_[i]; }      // in floats

  // Model::TrainStep on the GPU: host_x holds n * prod(input_shape) floats,
  // host_labels n * labels_per_sample() labels (negative: none). Gradients (on
  // the device) are OVERWRITTEN with d(grad_scale * sum of per-sample
  // losses)/dparam; dropout masks derive from dropout_seed exactly as on the
  // CPU. Blocks until the step is done (the loss is read back).
  // kInvalidArgument for n < 0. The same as StageInputs, EnqueueTrainStep,
  // FinishStep.
  absl::StatusOr<BatchLoss> TrainStep(const float* host_x,
                                      const int32_t* host_labels, int64_t n,
                                      const Loss& loss, float grad_scale,
                                      uint64_t dropout_seed);

  // Input staging, so a batch's host-to-device copy overlaps the step
  // before it: StageInputs copies the batch into pinned host memory and
  // enqueues its copy to the device on a separate copy stream, then
  // returns (the host arrays may be freed). Two slots: a batch may be
  // staged while the one before it trains; staging a third reuses the
  // first's slot once its step has run (waiting for it on the GPU, not the
  // host). kInvalidArgument for n < 0.
  struct StagedInput {
    int slot = -1;
    uint64_t serial = 0;  // which staging of the slot
    int64_t n = 0;
  };
  absl::StatusOr<StagedInput> StageInputs(const float* host_x,
                                          const int32_t* host_labels,
                                          int64_t n);
  // Enqueues TrainStep's work for a staged batch on stream() (behind its
  // copy) without waiting for it, the loss's copy to the host included.
  // kInvalidArgument when `in` was restaged since (the slot was reused).
  absl::Status EnqueueTrainStep(const StagedInput& in, const Loss& loss,
                                float grad_scale, uint64_t dropout_seed);
  // Waits for stream() and returns the enqueued step's loss.
  absl::StatusOr<BatchLoss> FinishStep();
  // The enqueued step's loss when the caller already knows stream() has
  // finished it (synchronized it, or waited for it another way).
  BatchLoss LossAfterSync() const;

  // Forward in inference mode, loss and accuracy; gradients untouched.
  absl::StatusOr<BatchLoss> Evaluate(const float* host_x,
                                     const int32_t* host_labels, int64_t n,
                                     const Loss& loss);

  // Replace the device parameters with `params`' values (same count and
  // sizes as Model::params(), e.g. another replica's or the host optimizer's
  // result). Through a pinned staging buffer; blocks until copied.
  absl::Status CopyParamsFromHost(const std::vector<Param*>& params);
  // Copy the device parameters into `params`' value tensors (same count and
  // sizes): the inverse of CopyParamsFromHost. Blocks until copied.
  absl::Status CopyParamsToHost(const std::vector<Param*>& params);
  // Copy the device gradients into `params`' grad tensors (same count and
  // sizes). One async copy into pinned staging, one sync.
  absl::Status CopyGradsToHost(std::vector<Param*>& params);

  // Called during TrainStep's backward, once per param index, last layer
  // first, on the TrainStep thread, as soon as the work computing that
  // param's gradient is ENQUEUED on stream(): work the callback enqueues on
  // stream() (an NCCL all-reduce, a copy) sees the final gradient; the host
  // must synchronize before reading it.
  void SetGradReadyCallback(std::function<void(int param_index)> cb) {
    grad_ready_ = std::move(cb);
  }
  // Model::SetPassCollective's: what sync batch norm's training passes sum
  // with (its sums wait for the stream); with one set, a step of no
  // samples still runs those layers' part.
  void SetPassCollective(PassCollective* collective) {
    collective_ = collective;
  }

 private:
  struct Buffer {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  struct Node;  // a graph node's device side
  struct InputSlot;
  struct Handles;

  GpuModel() = default;
  absl::Status Init(const GpuModelOptions& options);
  absl::Status Grow(Buffer* b, size_t bytes);
  absl::Status Reserve(int64_t n);
  absl::Status UseStaged(const StagedInput& in);
  // The layer's params' device pointers into its LayerIO.
  void BindParams(int node);
  absl::StatusOr<const float*> Forward(int64_t n, bool training, bool fuse,
                                       uint64_t dropout_seed);
  absl::Status Backward(int64_t n);
  absl::Status ComputeLoss(int64_t n, const float* out, const Loss& loss,
                           float scale, float* grad);
  void Ready(int param) const {
    if (grad_ready_) grad_ready_(param);
  }

  std::unique_ptr<Model> host_;
  const Graph* graph_ = nullptr;  // host_'s
  int device_ = 0;
  bool allow_tf32_ = false;
  InputRounding inputs_ = InputRounding::kNone;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<int64_t> offsets_;  // per param, in floats
  std::vector<int64_t> sizes_;    // per param, in floats
  int64_t total_floats_ = 0;      // params_dev_'s size (aligned offsets)
  std::function<void(int)> grad_ready_;
  PassCollective* collective_ = nullptr;
  // The sync layers' part in a step of no samples (Model::TrainStep's).
  absl::Status JoinPassSums();

  cudaStream_t stream_ = nullptr;
  std::unique_ptr<Handles> h_;  // cuBLAS, cuDNN, allocator, pinned staging
  float* params_dev_ = nullptr;
  float* grads_dev_ = nullptr;
  int64_t capacity_ = -1;      // the batch the buffers below hold
  std::vector<Buffer> grads_;  // per gradient slot
  std::vector<Buffer> temps_;  // per input position: a dx to add
  Buffer loss_ws_, sums_, workspace_;
  // The GPU pass of the last loss computed, looked up once per loss, not
  // per step.
  const Loss* device_loss_of_ = nullptr;
  const DeviceLoss* device_loss_ = nullptr;
  // Input staging (StageInputs): two slots, their copy stream, and the
  // batch the enqueued pass reads (each model input's [n, size] values,
  // then the labels).
  cudaStream_t copy_stream_ = nullptr;
  std::unique_ptr<InputSlot> slots_[2];
  int next_slot_ = 0;
  uint64_t next_serial_ = 1;
  std::vector<const float*> in_x_;  // per model input
  const int32_t* in_labels_ = nullptr;
  int64_t pending_n_ = 0;  // the enqueued pass's batch (its loss's count)
};

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_GPU_GPU_MODEL_H_
