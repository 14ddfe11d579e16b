// GpuModel: Model's forward / loss / backward loop (core/model.cc) over
// device buffers. Each layer's work is the CPU layer's, call for call:
// dense = GEMM + bias/activation, conv2d = cuDNN + bias/activation, max
// pooling, dropout with the CPU's mask; flatten and inactive dropout alias
// their input.
#include "kernels/cuda/layers/gpu_model.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/layers.h"
#include "core/status_macros.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/pool.h"
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_memory.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/layers/activation.h"
#include "kernels/cuda/layers/conv.h"
#include "kernels/cuda/layers/dropout.h"
#include "kernels/cuda/layers/mse.h"
#include "kernels/cuda/pool.h"
#include "kernels/cuda/softmax_xent.h"

namespace lockstep {
namespace cuda {
namespace {

// Each param starts on a 256-byte boundary (cuBLAS/cuDNN alignment).
constexpr int64_t kParamAlignFloats = 64;
// A staged batch's labels follow its features at this alignment.
constexpr size_t kInputAlignBytes = 256;

}  // namespace

struct GpuModel::Layer {
  LayerSpec spec;
  Shape in_shape;
  int64_t in_size = 0, out_size = 0;
  int kernel = -1, bias = -1;                 // param indices
  std::map<int64_t, CudnnConv2D> conv_plans;  // per batch size
  Buffer act;                                 // this layer's output
  Buffer argmax;                              // max pooling
  // This pass (as Model's PassContext).
  bool training = false, skip_softmax = false;
  uint64_t dropout_seed = 0;
  const float* out = nullptr;

  bool PassesThrough() const {
    return spec.type == LayerType::kFlatten ||
           (spec.type == LayerType::kDropout &&
            (!training || static_cast<float>(spec.rate) <= 0.0f));
  }
  ActivationKind Act() const {
    if (spec.activation == Activation::kSoftmax && skip_softmax) {
      return ActivationKind::kLinear;
    }
    return ToActivationKind(spec.activation);
  }
  Conv2DGeometry ConvGeometry(int64_t n) const {
    return Conv2DGeometry::Make(n, in_shape[0], in_shape[1], in_shape[2],
                                spec.kernel_h, spec.kernel_w, spec.filters,
                                spec.stride_h, spec.stride_w,
                                spec.padding == Padding::kSame);
  }
  Pool2DGeometry PoolGeometry(int64_t n) const {
    return Pool2DGeometry::Make(n, in_shape[0], in_shape[1], in_shape[2],
                                spec.pool_h, spec.pool_w, spec.pool_h,
                                spec.pool_w);
  }
};

// One input staging slot: the batch in pinned host memory and on the
// device (features, then labels at an aligned offset), and the events that
// order its reuse: `copied` on the copy stream after its copy, `consumed`
// on the compute stream after the pass that read it.
struct GpuModel::InputSlot {
  PinnedHostBuffer host;
  void* dev = nullptr;
  size_t bytes = 0;    // capacity of host and dev
  size_t x_bytes = 0;  // this staging's labels offset
  cudaEvent_t copied = nullptr;
  cudaEvent_t consumed = nullptr;
  uint64_t serial = 0;
  int64_t n = 0;
};

struct GpuModel::Handles {
  CublasHandle cublas;
  CudnnHandle cudnn;
  GemmOptions gemm;
  ConvOptions conv;
  std::unique_ptr<CachingAllocator> allocator;
  PinnedHostBuffer staging;  // total_floats_ floats
  PinnedHostBuffer sums;     // one DeviceLossSums
};

absl::StatusOr<std::unique_ptr<GpuModel>> GpuModel::Create(
    const ModelSpec& spec, uint64_t seed, const GpuModelOptions& options) {
  absl::StatusOr<std::vector<DeviceInfo>> devices = VisibleDevices();
  if (!devices.ok()) {
    return absl::Status(devices.status().code(),
                        absl::StrCat("GpuModel: ", devices.status().message()));
  }
  if (options.device < 0 ||
      options.device >= static_cast<int>(devices->size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("GpuModel: no device cuda:", options.device, " (",
                     devices->size(), " visible)"));
  }
  const DeviceInfo& info = (*devices)[options.device];
  if (info.compute_capability() < kMinComputeCapability) {
    return absl::FailedPreconditionError(
        absl::StrCat("GpuModel: ", info.ToString(), " is older than sm_",
                     kMinComputeCapability, ", which the kernels need"));
  }
  std::unique_ptr<GpuModel> m(new GpuModel());
  ASSIGN_OR_RETURN(m->host_, Model::Build(spec, seed));
  RETURN_IF_ERROR(m->Init(spec, options));
  return m;
}

absl::Status GpuModel::Init(const ModelSpec& spec,
                            const GpuModelOptions& options) {
  device_ = options.device;
  allow_tf32_ = options.allow_tf32;
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  CUDA_RETURN_IF_ERROR(
      cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  h_ = std::make_unique<Handles>();
  CUDA_RETURN_IF_ERROR(
      cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
  for (auto& slot : slots_) {
    slot = std::make_unique<InputSlot>();
    CUDA_RETURN_IF_ERROR(
        cudaEventCreateWithFlags(&slot->copied, cudaEventDisableTiming));
    CUDA_RETURN_IF_ERROR(
        cudaEventCreateWithFlags(&slot->consumed, cudaEventDisableTiming));
  }
  ASSIGN_OR_RETURN(h_->cublas, CublasHandle::Create());
  ASSIGN_OR_RETURN(h_->cudnn, CudnnHandle::Create());
  h_->gemm.allow_tf32 = allow_tf32_;
  h_->conv.allow_tf32 = allow_tf32_;
  h_->allocator = NewDeviceAllocator(device_);

  // Layers, mirroring the host model's (same shapes, same param order).
  const std::vector<Param*>& params = host_->params();
  int next_param = 0;
  bool any_params = false;
  max_width_ = NumElements(host_->input_shape());
  for (int i = 0; i < host_->num_layers(); ++i) {
    auto l = std::make_unique<Layer>();
    l->spec = spec.layers[i];
    l->in_shape = host_->layer(i).input_shape();
    l->in_size = host_->layer(i).input_size();
    l->out_size = host_->layer(i).output_size();
    max_width_ = std::max(max_width_, l->out_size);
    first_param_.push_back(next_param);
    needs_dx_.push_back(any_params);
    if (l->spec.type == LayerType::kDense ||
        l->spec.type == LayerType::kConv2D) {
      l->kernel = next_param++;
      if (l->spec.use_bias) l->bias = next_param++;
      any_params = true;
    }
    layers_.push_back(std::move(l));
  }
  if (next_param != static_cast<int>(params.size())) {
    return absl::InternalError(absl::StrCat("GpuModel: expected ", next_param,
                                            " params, the Model has ",
                                            params.size()));
  }
  const LayerSpec& last = spec.layers.back();
  last_is_softmax_ =
      (last.type == LayerType::kDense || last.type == LayerType::kConv2D) &&
      last.activation == Activation::kSoftmax;

  for (const Param* p : params) {
    offsets_.push_back(total_floats_);
    sizes_.push_back(p->value.size());
    total_floats_ += (p->value.size() + kParamAlignFloats - 1) /
                     kParamAlignFloats * kParamAlignFloats;
  }
  const size_t bytes = std::max<int64_t>(total_floats_, 1) * sizeof(float);
  ASSIGN_OR_RETURN(void* pv, h_->allocator->Allocate(bytes, stream_));
  ASSIGN_OR_RETURN(void* gv, h_->allocator->Allocate(bytes, stream_));
  params_dev_ = static_cast<float*>(pv);
  grads_dev_ = static_cast<float*>(gv);
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(params_dev_, 0, bytes, stream_));
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(grads_dev_, 0, bytes, stream_));
  ASSIGN_OR_RETURN(h_->staging, PinnedHostBuffer::Create(bytes));
  ASSIGN_OR_RETURN(h_->sums, PinnedHostBuffer::Create(sizeof(DeviceLossSums)));
  RETURN_IF_ERROR(Grow(&sums_, sizeof(DeviceLossSums)));
  return CopyParamsFromHost(params);
}

GpuModel::~GpuModel() {
  cudaSetDevice(device_);
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (copy_stream_ != nullptr) cudaStreamSynchronize(copy_stream_);
  for (auto& slot : slots_) {
    if (slot == nullptr) continue;
    if (slot->dev != nullptr) cudaFree(slot->dev);
    if (slot->copied != nullptr) cudaEventDestroy(slot->copied);
    if (slot->consumed != nullptr) cudaEventDestroy(slot->consumed);
    slot.reset();  // its pinned buffer too
  }
  if (copy_stream_ != nullptr) cudaStreamDestroy(copy_stream_);
  if (h_ == nullptr) {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    return;
  }
  CachingAllocator& a = *h_->allocator;
  for (void* p :
       {static_cast<void*>(params_dev_), static_cast<void*>(grads_dev_),
        grad_a_.ptr, grad_b_.ptr, loss_ws_.ptr, conv_ws_.ptr, sums_.ptr,
        bias_ws_.ptr}) {
    if (p != nullptr) a.Free(p).IgnoreError();
  }
  for (auto& l : layers_) {
    for (void* p : {l->act.ptr, l->argmax.ptr}) {
      if (p != nullptr) a.Free(p).IgnoreError();
    }
  }
  h_.reset();  // the allocator returns its cache; handles are destroyed
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::Status GpuModel::Grow(Buffer* b, size_t bytes) {
  if (b->bytes >= bytes) return absl::OkStatus();
  // The old block goes back to this stream's cache: work already enqueued
  // that uses it runs before anything that gets it again.
  if (b->ptr != nullptr) RETURN_IF_ERROR(h_->allocator->Free(b->ptr));
  b->ptr = nullptr;
  b->bytes = 0;
  ASSIGN_OR_RETURN(b->ptr, h_->allocator->Allocate(bytes, stream_));
  b->bytes = bytes;
  return absl::OkStatus();
}

absl::Status GpuModel::Reserve(int64_t n) {
  if (n <= capacity_) return absl::OkStatus();
  RETURN_IF_ERROR(Grow(&grad_a_, n * max_width_ * sizeof(float)));
  RETURN_IF_ERROR(Grow(&grad_b_, n * max_width_ * sizeof(float)));
  RETURN_IF_ERROR(Grow(&loss_ws_, std::max(SoftmaxCrossEntropyWorkspaceBytes(n),
                                           MeanSquaredErrorWorkspaceBytes(n))));
  int64_t bias_ws = 0;  // floats: the largest BiasGrad workspace
  for (auto& l : layers_) {
    if (l->bias < 0) continue;
    const int64_t cols = l->spec.type == LayerType::kConv2D
                             ? static_cast<int64_t>(l->spec.filters)
                             : l->out_size;
    bias_ws = std::max(bias_ws,
                       BiasGradWorkspaceFloats(n * l->out_size / cols, cols));
  }
  RETURN_IF_ERROR(Grow(&bias_ws_, std::max<int64_t>(bias_ws, 1) * sizeof(float)));
  for (auto& l : layers_) {
    if (l->spec.type == LayerType::kFlatten) continue;
    RETURN_IF_ERROR(Grow(&l->act, n * l->out_size * sizeof(float)));
    if (l->spec.type == LayerType::kMaxPool2D) {
      RETURN_IF_ERROR(Grow(&l->argmax, n * l->out_size * sizeof(int32_t)));
    }
  }
  capacity_ = n;
  return absl::OkStatus();
}

absl::StatusOr<const CudnnConv2D*> GpuModel::ConvPlan(Layer& l, int64_t n) {
  auto it = l.conv_plans.find(n);
  if (it == l.conv_plans.end()) {
    ASSIGN_OR_RETURN(
        CudnnConv2D plan,
        CudnnConv2D::Create(h_->cudnn, l.ConvGeometry(n), h_->conv));
    RETURN_IF_ERROR(Grow(&conv_ws_, plan.workspace_bytes()));
    it = l.conv_plans.emplace(n, std::move(plan)).first;
  }
  return &it->second;
}

absl::StatusOr<GpuModel::StagedInput> GpuModel::StageInputs(
    const float* host_x, const int32_t* host_labels, int64_t n) {
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GpuModel::StageInputs: negative batch ", n));
  }
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  const int index = next_slot_;
  next_slot_ ^= 1;
  InputSlot& slot = *slots_[index];
  const size_t x_bytes =
      (n * NumElements(host_->input_shape()) * sizeof(float) +
       kInputAlignBytes - 1) /
      kInputAlignBytes * kInputAlignBytes;
  const size_t bytes = x_bytes + n * sizeof(int32_t);
  // The pinned buffer may still feed the slot's previous copy.
  CUDA_RETURN_IF_ERROR(cudaEventSynchronize(slot.copied));
  if (bytes > slot.bytes) {
    // The device buffer may still be read by the pass that used it.
    CUDA_RETURN_IF_ERROR(cudaEventSynchronize(slot.consumed));
    if (slot.dev != nullptr) CUDA_RETURN_IF_ERROR(cudaFree(slot.dev));
    slot.dev = nullptr;
    slot.bytes = 0;
    slot.host = PinnedHostBuffer();
    ASSIGN_OR_RETURN(slot.host, PinnedHostBuffer::Create(bytes));
    CUDA_RETURN_IF_ERROR(cudaMalloc(&slot.dev, bytes));
    slot.bytes = bytes;
  }
  if (n > 0) {
    char* pinned = slot.host.as<char>();
    std::memcpy(pinned, host_x,
                n * NumElements(host_->input_shape()) * sizeof(float));
    std::memcpy(pinned + x_bytes, host_labels, n * sizeof(int32_t));
    CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy_stream_, slot.consumed, 0));
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot.dev, pinned, bytes,
                                         cudaMemcpyHostToDevice, copy_stream_));
  }
  CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.copied, copy_stream_));
  slot.serial = next_serial_++;
  slot.n = n;
  slot.x_bytes = x_bytes;
  StagedInput staged;
  staged.slot = index;
  staged.serial = slot.serial;
  staged.n = n;
  return staged;
}

absl::Status GpuModel::UseStaged(const StagedInput& in) {
  if (in.slot < 0 || in.slot > 1 || slots_[in.slot]->serial != in.serial ||
      slots_[in.slot]->n != in.n) {
    return absl::InvalidArgumentError(
        "GpuModel: that staged batch was overwritten by later StageInputs "
        "calls (at most two are kept)");
  }
  InputSlot& slot = *slots_[in.slot];
  CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream_, slot.copied, 0));
  in_x_ = static_cast<const float*>(slot.dev);
  in_labels_ = reinterpret_cast<const int32_t*>(
      static_cast<const char*>(slot.dev) + slot.x_bytes);
  return absl::OkStatus();
}

absl::Status GpuModel::LayerForward(Layer& l, int64_t n, const float* x,
                                    float* y) {
  switch (l.spec.type) {
    case LayerType::kDense: {
      const int64_t in = l.in_size, units = l.out_size;
      RETURN_IF_ERROR(Gemm(h_->cublas, stream_, h_->gemm, false, false, n,
                           units, in, 1.0f, x, in, device_param(l.kernel),
                           units, 0.0f, y, units));
      CUDA_RETURN_IF_ERROR(BiasActivationForward(
          n, units, l.bias >= 0 ? device_param(l.bias) : nullptr, l.Act(), y,
          stream_));
      return absl::OkStatus();
    }
    case LayerType::kConv2D: {
      ASSIGN_OR_RETURN(const CudnnConv2D* plan, ConvPlan(l, n));
      return plan->Forward(h_->cudnn, stream_, x, device_param(l.kernel),
                           l.bias >= 0 ? device_param(l.bias) : nullptr,
                           l.Act(), y, conv_ws_.ptr);
    }
    case LayerType::kMaxPool2D:
      CUDA_RETURN_IF_ERROR(MaxPool2DForward(l.PoolGeometry(n), x, y,
                                            static_cast<int32_t*>(l.argmax.ptr),
                                            stream_));
      return absl::OkStatus();
    case LayerType::kDropout:
      CUDA_RETURN_IF_ERROR(DropoutForward(n * l.in_size,
                                          static_cast<float>(l.spec.rate),
                                          l.dropout_seed, x, y, stream_));
      return absl::OkStatus();
    case LayerType::kFlatten:
      break;
  }
  return absl::OkStatus();
}

absl::Status GpuModel::LayerBackward(Layer& l, int64_t n, const float* x,
                                     const float* y, float* dy, float* dx) {
  switch (l.spec.type) {
    case LayerType::kDense: {
      const int64_t in = l.in_size, units = l.out_size;
      CUDA_RETURN_IF_ERROR(ActivationBackwardBiasGrad(
          n, units, l.Act(), y, dy, l.bias >= 0 ? device_grad(l.bias) : nullptr,
          stream_, static_cast<float*>(bias_ws_.ptr)));
      RETURN_IF_ERROR(Gemm(h_->cublas, stream_, h_->gemm, true, false, in,
                           units, n, 1.0f, x, in, dy, units, 0.0f,
                           device_grad(l.kernel), units));
      if (dx != nullptr) {
        RETURN_IF_ERROR(Gemm(h_->cublas, stream_, h_->gemm, false, true, n, in,
                             units, 1.0f, dy, units, device_param(l.kernel),
                             units, 0.0f, dx, in));
      }
      return absl::OkStatus();
    }
    case LayerType::kConv2D: {
      ASSIGN_OR_RETURN(const CudnnConv2D* plan, ConvPlan(l, n));
      CUDA_RETURN_IF_ERROR(ActivationBackwardBiasGrad(
          n * l.out_size / l.spec.filters, l.spec.filters, l.Act(), y, dy,
          l.bias >= 0 ? device_grad(l.bias) : nullptr, stream_,
          static_cast<float*>(bias_ws_.ptr)));
      return plan->Backward(h_->cudnn, stream_, x, device_param(l.kernel), dy,
                            device_grad(l.kernel), nullptr, dx, conv_ws_.ptr);
    }
    case LayerType::kMaxPool2D:
      if (dx != nullptr) {
        CUDA_RETURN_IF_ERROR(MaxPool2DBackward(
            l.PoolGeometry(n), dy, static_cast<const int32_t*>(l.argmax.ptr),
            dx, stream_));
      }
      return absl::OkStatus();
    case LayerType::kDropout:
      if (dx != nullptr) {
        CUDA_RETURN_IF_ERROR(DropoutBackward(n * l.in_size,
                                             static_cast<float>(l.spec.rate),
                                             l.dropout_seed, dy, dx, stream_));
      }
      return absl::OkStatus();
    case LayerType::kFlatten:
      break;
  }
  return absl::OkStatus();
}

absl::StatusOr<const float*> GpuModel::Forward(int64_t n, bool training,
                                               bool fuse,
                                               uint64_t dropout_seed) {
  const float* in = in_x_;
  const int last = static_cast<int>(layers_.size()) - 1;
  for (int i = 0; i <= last; ++i) {
    Layer& l = *layers_[i];
    l.training = training;
    l.dropout_seed = Mix64(dropout_seed ^ Mix64(static_cast<uint64_t>(i)));
    l.skip_softmax = fuse && i == last;
    if (l.PassesThrough()) {
      l.out = in;
    } else {
      float* out = static_cast<float*>(l.act.ptr);
      absl::Status s = LayerForward(l, n, in, out);
      if (!s.ok()) {
        return absl::Status(
            s.code(), absl::StrCat("forward of layer ", i, ": ", s.message()));
      }
      l.out = out;
    }
    in = l.out;
  }
  return in;
}

absl::Status GpuModel::Loss(int64_t n, const float* out, LossType loss,
                            float scale, float* grad) {
  const int64_t classes = NumElements(host_->output_shape());
  auto* sums = static_cast<DeviceLossSums*>(sums_.ptr);
  const int32_t* labels = in_labels_;
  if (loss == LossType::kMse) {
    CUDA_RETURN_IF_ERROR(MeanSquaredError(n, classes, out, labels, scale, grad,
                                          loss_ws_.ptr, sums, stream_));
  } else {
    CUDA_RETURN_IF_ERROR(SoftmaxCrossEntropy(n, classes, out, labels, scale,
                                             grad, nullptr, loss_ws_.ptr, sums,
                                             stream_));
  }
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
  b.count = pending_n_;
  return b;
}

void GpuModel::NotifyLayer(int layer) {
  if (!grad_ready_) return;
  const int end = layer + 1 < static_cast<int>(layers_.size())
                      ? first_param_[layer + 1]
                      : num_params();
  for (int p = first_param_[layer]; p < end; ++p) grad_ready_(p);
}

absl::StatusOr<BatchLoss> GpuModel::TrainStep(const float* host_x,
                                              const int32_t* host_labels,
                                              int64_t n, LossType loss,
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

absl::Status GpuModel::EnqueueTrainStep(const StagedInput& in, LossType loss,
                                        float grad_scale,
                                        uint64_t dropout_seed) {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  RETURN_IF_ERROR(UseStaged(in));
  const int64_t n = in.n;
  pending_n_ = n;
  InputSlot& slot = *slots_[in.slot];
  const int last = static_cast<int>(layers_.size()) - 1;
  if (n == 0) {
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(
        grads_dev_, 0, std::max<int64_t>(total_floats_, 1) * sizeof(float),
        stream_));
    for (int i = last; i >= 0; --i) NotifyLayer(i);
    CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.consumed, stream_));
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(Reserve(n));
  // As Model: cross-entropy on a softmax output starts from the logits.
  const bool fuse =
      last_is_softmax_ && loss == LossType::kSparseCategoricalCrossentropy;
  ASSIGN_OR_RETURN(const float* out,
                   Forward(n, /*training=*/true, fuse, dropout_seed));
  float* dy = static_cast<float*>(grad_a_.ptr);
  float* spare = static_cast<float*>(grad_b_.ptr);
  RETURN_IF_ERROR(Loss(n, out, loss, grad_scale, dy));
  for (int i = last; i >= 0; --i) {
    Layer& l = *layers_[i];
    const float* in_act = i == 0 ? in_x_ : layers_[i - 1]->out;
    if (!l.PassesThrough()) {
      float* dx = needs_dx_[i] ? spare : nullptr;
      absl::Status s = LayerBackward(l, n, in_act, l.out, dy, dx);
      if (!s.ok()) {
        return absl::Status(
            s.code(), absl::StrCat("backward of layer ", i, ": ", s.message()));
      }
      std::swap(dy, spare);
    }
    NotifyLayer(i);
    if (!needs_dx_[i]) break;  // nothing below has parameters
  }
  CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.consumed, stream_));
  return absl::OkStatus();
}

absl::StatusOr<BatchLoss> GpuModel::Evaluate(const float* host_x,
                                             const int32_t* host_labels,
                                             int64_t n, LossType loss) {
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GpuModel::Evaluate: negative batch ", n));
  }
  if (n == 0) return BatchLoss();
  ASSIGN_OR_RETURN(StagedInput in, StageInputs(host_x, host_labels, n));
  RETURN_IF_ERROR(UseStaged(in));
  pending_n_ = n;
  RETURN_IF_ERROR(Reserve(n));
  const bool fuse =
      last_is_softmax_ && loss == LossType::kSparseCategoricalCrossentropy;
  ASSIGN_OR_RETURN(const float* out, Forward(n, /*training=*/false, fuse, 0));
  RETURN_IF_ERROR(Loss(n, out, loss, 0.0f, nullptr));
  CUDA_RETURN_IF_ERROR(cudaEventRecord(slots_[in.slot]->consumed, stream_));
  return FinishStep();
}

namespace {

absl::Status CheckParams(const std::vector<Param*>& params,
                         const std::vector<int64_t>& sizes, const char* what) {
  if (params.size() != sizes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("GpuModel::", what, ": ", params.size(),
                     " params given, the model has ", sizes.size()));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i]->value.size() != sizes[i] ||
        params[i]->grad.size() != sizes[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GpuModel::", what, ": param ", i, " (", params[i]->name, ") has ",
          params[i]->value.size(), " values, the model's has ", sizes[i]));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status GpuModel::CopyParamsFromHost(const std::vector<Param*>& params) {
  RETURN_IF_ERROR(CheckParams(params, sizes_, "CopyParamsFromHost"));
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  // The staging buffer may still feed an earlier copy.
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  float* staging = h_->staging.as<float>();
  for (size_t i = 0; i < params.size(); ++i) {
    std::memcpy(staging + offsets_[i], params[i]->value.data(),
                sizes_[i] * sizeof(float));
  }
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(params_dev_, staging,
                                       total_floats_ * sizeof(float),
                                       cudaMemcpyHostToDevice, stream_));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status GpuModel::CopyParamsToHost(const std::vector<Param*>& params) {
  RETURN_IF_ERROR(CheckParams(params, sizes_, "CopyParamsToHost"));
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  float* staging = h_->staging.as<float>();
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(staging, params_dev_,
                                       total_floats_ * sizeof(float),
                                       cudaMemcpyDeviceToHost, stream_));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  for (size_t i = 0; i < params.size(); ++i) {
    std::memcpy(params[i]->value.data(), staging + offsets_[i],
                sizes_[i] * sizeof(float));
  }
  return absl::OkStatus();
}

absl::Status GpuModel::CopyGradsToHost(std::vector<Param*>& params) {
  RETURN_IF_ERROR(CheckParams(params, sizes_, "CopyGradsToHost"));
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  float* staging = h_->staging.as<float>();
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(staging, grads_dev_,
                                       total_floats_ * sizeof(float),
                                       cudaMemcpyDeviceToHost, stream_));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  for (size_t i = 0; i < params.size(); ++i) {
    std::memcpy(params[i]->grad.data(), staging + offsets_[i],
                sizes_[i] * sizeof(float));
  }
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace lockstep
