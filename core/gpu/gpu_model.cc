// GpuModel: Model's forward / loss / planned backward (core/model/model.cc) over
// device buffers, each layer through its registered CUDA implementation.
// Pass-through layers alias their input's activation and gradient; a
// gradient several layers feed is written by the first and added to by the
// rest, in the graph's fixed plan.
#include "core/gpu/gpu_model.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/gpu/device_loss.h"
#include "core/gpu/gpu_model_internal.h"
#include "core/layers/device_layer.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_memory.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/layers/conv.h"
#include "kernels/cuda/layers/device_context.h"
#include "kernels/cuda/softmax_xent.h"

namespace lockstep {
namespace cuda {

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
  m->graph_ = &m->host_->graph();
  RETURN_IF_ERROR(m->Init(options));
  return m;
}

absl::Status GpuModel::Init(const GpuModelOptions& options) {
  device_ = options.device;
  allow_tf32_ = options.allow_tf32;
  inputs_ = options.inputs;
  const Graph& g = *graph_;
  // Every layer type needs its CUDA side before anything is allocated.
  nodes_.resize(g.nodes().size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    nodes_[i] = std::make_unique<Node>();
    const GraphNode& gn = g.node(static_cast<int>(i));
    if (gn.layer == nullptr) continue;
    nodes_[i]->impl = FindDeviceLayer(gn.layer->type());
    if (nodes_[i]->impl == nullptr) {
      return absl::UnimplementedError(absl::StrCat(
          "GpuModel: layer ", gn.name, " (", gn.layer->type(),
          ") has no CUDA implementation; train this model on CPUs"));
    }
    if (nodes_[i]->impl->supports) {
      const absl::Status s = nodes_[i]->impl->supports(*gn.layer);
      if (!s.ok()) {
        return absl::UnimplementedError(absl::StrCat(
            "GpuModel: layer ", gn.name, " (", gn.layer->type(), "): ",
            s.message(), "; train this model on CPUs"));
      }
    }
    if (nodes_[i]->impl->make_state) {
      nodes_[i]->state = nodes_[i]->impl->make_state(*gn.layer);
    }
    nodes_[i]->io.x.resize(gn.inputs.size());
    nodes_[i]->io.dx.resize(gn.inputs.size());
  }
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
  h_->allocator = NewDeviceAllocator(device_);
  ASSIGN_OR_RETURN(h_->cublas, CublasHandle::Create(h_->allocator.get()));
  ASSIGN_OR_RETURN(h_->cudnn, CudnnHandle::Create());
  DeviceContext& dc = h_->dc;
  dc.device = device_;
  dc.stream = stream_;
  dc.cublas = &h_->cublas;
  dc.cudnn = &h_->cudnn;
  dc.gemm.allow_tf32 = allow_tf32_;
  dc.conv.allow_tf32 = allow_tf32_;
  dc.gemm.inputs = inputs_;
  dc.conv.inputs = inputs_;
  dc.workspace = [this](size_t bytes) -> absl::StatusOr<void*> {
    RETURN_IF_ERROR(Grow(&workspace_, std::max<size_t>(bytes, 256)));
    return workspace_.ptr;
  };

  const std::vector<Param*>& params = g.params();
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
  for (size_t i = 0; i < nodes_.size(); ++i) BindParams(static_cast<int>(i));
  grads_.resize(g.num_slots());
  size_t max_inputs = 1;
  for (const GraphNode& gn : g.nodes()) {
    max_inputs = std::max(max_inputs, gn.inputs.size());
  }
  temps_.resize(max_inputs);
  in_x_.resize(g.num_inputs());
  ASSIGN_OR_RETURN(h_->staging, PinnedHostBuffer::Create(bytes));
  ASSIGN_OR_RETURN(h_->sums, PinnedHostBuffer::Create(sizeof(DeviceLossSums)));
  RETURN_IF_ERROR(Grow(&sums_, sizeof(DeviceLossSums)));
  return CopyParamsFromHost(params);
}

void GpuModel::BindParams(int node) {
  LayerIO& io = nodes_[node]->io;
  io.w.clear();
  io.dw.clear();
  for (int p : graph_->node(node).params) {
    io.w.push_back(params_dev_ + offsets_[p]);
    io.dw.push_back(grads_dev_ + offsets_[p]);
  }
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
  auto free = [&a](void* p) {
    if (p != nullptr) a.Free(p).IgnoreError();
  };
  free(params_dev_);
  free(grads_dev_);
  for (Buffer* b : {&loss_ws_, &sums_, &workspace_}) free(b->ptr);
  for (Buffer& b : grads_) free(b.ptr);
  for (Buffer& b : temps_) free(b.ptr);
  for (auto& node : nodes_) {
    if (node == nullptr) continue;
    free(node->act.ptr);
    free(node->scratch.ptr);
    node->state.reset();  // cuDNN plans, before their handle
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
  const Graph& g = *graph_;
  const int64_t rows = n * host_->labels_per_sample();
  RETURN_IF_ERROR(Grow(&loss_ws_, DeviceLossWorkspaceBytes(rows)));
  PassContext training, inference;
  training.training = true;
  int64_t widest = 1;
  for (size_t i = g.num_inputs(); i < nodes_.size(); ++i) {
    const GraphNode& gn = g.node(static_cast<int>(i));
    Node& node = *nodes_[i];
    if (!gn.layer->PassesThrough(training) ||
        !gn.layer->PassesThrough(inference)) {
      RETURN_IF_ERROR(Grow(&node.act, n * gn.size * sizeof(float)));
    }
    if (node.impl->scratch_bytes) {
      const int64_t s = node.impl->scratch_bytes(*gn.layer, n);
      if (s > 0) RETURN_IF_ERROR(Grow(&node.scratch, s));
    }
  }
  for (int s = 0; s < g.num_slots(); ++s) {
    widest = std::max(widest, g.slot_size(s));
    RETURN_IF_ERROR(Grow(&grads_[s], n * g.slot_size(s) * sizeof(float)));
  }
  for (Buffer& t : temps_) {
    RETURN_IF_ERROR(Grow(&t, n * widest * sizeof(float)));
  }
  capacity_ = n;
  return absl::OkStatus();
}

absl::StatusOr<const float*> GpuModel::Forward(int64_t n, bool training,
                                               bool fuse,
                                               uint64_t dropout_seed) {
  const Graph& g = *graph_;
  for (int i = 0; i < g.num_inputs(); ++i) nodes_[i]->out = in_x_[i];
  const int output = g.output();
  for (int i = g.num_inputs(); i <= output; ++i) {
    const GraphNode& gn = g.node(i);
    Node& node = *nodes_[i];
    node.ctx.training = training && !gn.frozen;
    node.ctx.dropout_seed =
        Mix64(dropout_seed ^ Mix64(static_cast<uint64_t>(gn.layer_index)));
    node.ctx.skip_output_activation = fuse && i == output;
    node.ctx.collective = training ? collective_ : nullptr;
    node.ctx.collective_key = PassCollectiveKey(i);
    if (gn.layer->PassesThrough(node.ctx)) {
      node.out = nodes_[gn.inputs[0]]->out;
      continue;
    }
    LayerIO& io = node.io;
    io.n = n;
    for (size_t k = 0; k < gn.inputs.size(); ++k) {
      io.x[k] = nodes_[gn.inputs[k]]->out;
    }
    io.y = static_cast<float*>(node.act.ptr);
    io.scratch = node.scratch.ptr;
    absl::Status s =
        node.impl->forward(*gn.layer, node.state.get(), io, node.ctx, h_->dc);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("forward of layer ", gn.name,
                                                 ": ", s.message()));
    }
    node.out = io.y;
  }
  return nodes_[output]->out;
}

absl::Status GpuModel::Backward(int64_t n) {
  const Graph& g = *graph_;
  for (const BackwardStep& step : g.backward_plan()) {
    const GraphNode& gn = g.node(step.node);
    Node& node = *nodes_[step.node];
    LayerIO& io = node.io;
    io.dy = static_cast<float*>(grads_[g.grad_slot(step.node)].ptr);
    for (size_t k = 0; k < gn.inputs.size(); ++k) {
      io.x[k] = nodes_[gn.inputs[k]]->out;
      const int slot = step.dx_slot[k];
      io.dx[k] = slot < 0         ? nullptr
                 : step.dx_add[k] ? static_cast<float*>(temps_[k].ptr)
                                  : static_cast<float*>(grads_[slot].ptr);
    }
    io.y = const_cast<float*>(node.out);
    absl::Status s =
        node.impl->backward(*gn.layer, node.state.get(), io, node.ctx, h_->dc);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("backward of layer ", gn.name,
                                                 ": ", s.message()));
    }
    for (size_t k = 0; k < gn.inputs.size(); ++k) {
      const int slot = step.dx_slot[k];
      if (slot < 0 || !step.dx_add[k]) continue;
      CUDA_RETURN_IF_ERROR(Axpy(n * g.slot_size(slot), 1.0f, io.dx[k],
                                static_cast<float*>(grads_[slot].ptr),
                                stream_));
    }
    for (int p : step.ready_params) Ready(p);
  }
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace lockstep
