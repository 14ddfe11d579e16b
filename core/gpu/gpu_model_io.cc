// GpuModel's traffic with the host (see gpu_model.h): a batch staged in
// pinned memory and copied on the copy stream, and parameters and
// gradients copied to and from host Params.
#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/gpu/gpu_model.h"
#include "core/gpu/gpu_model_internal.h"
#include "kernels/cuda/cuda_status.h"

namespace lockstep {
namespace cuda {

absl::StatusOr<GpuModel::StagedInput> GpuModel::StageInputs(
    const float* host_x, const int32_t* host_labels, int64_t n) {
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GpuModel::StageInputs: negative batch ", n));
  }
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  const Graph& g = *graph_;
  const int index = next_slot_;
  next_slot_ ^= 1;
  InputSlot& slot = *slots_[index];
  // Each input's [n, size] values at an aligned offset, then the labels.
  std::vector<size_t> offsets(g.num_inputs());
  size_t bytes = 0;
  for (int i = 0; i < g.num_inputs(); ++i) {
    offsets[i] = bytes;
    bytes += AlignUp(n * g.node(i).size * sizeof(float));
  }
  const size_t labels_offset = bytes;
  const int64_t labels = n * host_->labels_per_sample();
  bytes += labels * sizeof(int32_t);
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
    const int64_t per = g.input_floats();
    for (int i = 0; i < g.num_inputs(); ++i) {
      const int64_t size = g.node(i).size;
      float* dst = reinterpret_cast<float*>(pinned + offsets[i]);
      if (g.num_inputs() == 1) {
        std::memcpy(dst, host_x, n * size * sizeof(float));
        continue;
      }
      for (int64_t s = 0; s < n; ++s) {
        std::memcpy(dst + s * size, host_x + s * per + g.input_offset(i),
                    size * sizeof(float));
      }
    }
    std::memcpy(pinned + labels_offset, host_labels, labels * sizeof(int32_t));
    CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy_stream_, slot.consumed, 0));
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot.dev, pinned, bytes,
                                         cudaMemcpyHostToDevice, copy_stream_));
  }
  CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.copied, copy_stream_));
  slot.serial = next_serial_++;
  slot.n = n;
  slot.input_offset = std::move(offsets);
  slot.labels_offset = labels_offset;
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
  char* base = static_cast<char*>(slot.dev);
  for (size_t i = 0; i < in_x_.size(); ++i) {
    in_x_[i] = reinterpret_cast<const float*>(base + slot.input_offset[i]);
  }
  in_labels_ = reinterpret_cast<const int32_t*>(base + slot.labels_offset);
  return absl::OkStatus();
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
