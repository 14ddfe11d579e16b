// CudaMallocBackend and PinnedHostBuffer over the CUDA runtime.
#include "kernels/cuda/cuda_memory.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "kernels/cuda/cuda_status.h"

namespace lockstep {
namespace cuda {

absl::StatusOr<void*> CudaMallocBackend::Allocate(size_t bytes) {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  void* ptr = nullptr;
  absl::Status status = CUDA_STATUS(cudaMalloc(&ptr, bytes));
  if (!status.ok()) {
    cudaGetLastError();  // out of memory is not sticky: clear it
    return status;
  }
  return ptr;
}

absl::Status CudaMallocBackend::Free(void* ptr) {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  return CUDA_STATUS(cudaFree(ptr));
}

std::unique_ptr<CachingAllocator> NewDeviceAllocator(int device) {
  return std::make_unique<CachingAllocator>(
      std::make_unique<CudaMallocBackend>(device));
}

absl::StatusOr<PinnedHostBuffer> PinnedHostBuffer::Create(size_t bytes) {
  if (bytes == 0) return PinnedHostBuffer();
  void* ptr = nullptr;
  absl::Status status =
      CUDA_STATUS(cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable));
  if (!status.ok()) {
    cudaGetLastError();
    return status;
  }
  return PinnedHostBuffer(ptr, bytes);
}

PinnedHostBuffer::PinnedHostBuffer(PinnedHostBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

PinnedHostBuffer& PinnedHostBuffer::operator=(
    PinnedHostBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

PinnedHostBuffer::~PinnedHostBuffer() { Release(); }

void PinnedHostBuffer::Release() {
  if (data_ != nullptr) cudaFreeHost(data_);  // nothing to report it to
  data_ = nullptr;
  size_ = 0;
}

}  // namespace cuda
}  // namespace lockstep
