// Device and pinned host memory from the CUDA runtime: the cudaMalloc backend
// of CachingAllocator, and page-locked host buffers for fast, asynchronous
// host<->device copies.
#ifndef LOCKSTEP_KERNELS_CUDA_CUDA_MEMORY_H_
#define LOCKSTEP_KERNELS_CUDA_CUDA_MEMORY_H_

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_status.h"

namespace lockstep {
namespace cuda {

// cudaMalloc / cudaFree on one device (made current on the calling thread
// for each call). Both block and may synchronize the device.
class CudaMallocBackend : public MemoryBackend {
 public:
  explicit CudaMallocBackend(int device) : device_(device) {}
  absl::StatusOr<void*> Allocate(size_t bytes) override;
  absl::Status Free(void* ptr) override;

 private:
  const int device_;
};

// A caching allocator over cudaMalloc on `device`.
std::unique_ptr<CachingAllocator> NewDeviceAllocator(int device);

// A zeroed buffer of `count` T on one GPU (at least one), freed on that
// device; held by unique_ptr (neither copied nor moved). Create leaves
// `device` current (its callers go on to copy there); the destructor puts
// back the thread's device. Errors: CUDA's (out of memory).
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
    // cudaMemset may return before it lands, and the models' streams do
    // not wait for the legacy stream (cudaStreamNonBlocking): set-up only.
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(nullptr));
    return buffer;
  }
  ~DeviceBuffer() {
    if (ptr_ == nullptr) return;
    int current = 0;
    const bool known = cudaGetDevice(&current) == cudaSuccess;
    cudaSetDevice(device_);
    cudaFree(ptr_);
    if (known) cudaSetDevice(current);
    cudaGetLastError();  // nothing above may be left for a later call to read
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return ptr_; }

 private:
  explicit DeviceBuffer(int device) : device_(device) {}
  const int device_;
  T* ptr_ = nullptr;
};

// Page-locked host memory (cudaHostAlloc, portable across devices). Move-only;
// frees itself. The contents start uninitialized. Thread-safe as a plain
// buffer is: concurrent readers are fine, writers need their own ordering.
class PinnedHostBuffer {
 public:
  // kFailedPrecondition without a usable driver, kResourceExhausted when the
  // host cannot pin that much. bytes == 0 gives an empty buffer.
  static absl::StatusOr<PinnedHostBuffer> Create(size_t bytes);

  PinnedHostBuffer() = default;
  PinnedHostBuffer(PinnedHostBuffer&& other) noexcept;
  PinnedHostBuffer& operator=(PinnedHostBuffer&& other) noexcept;
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;
  ~PinnedHostBuffer();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  PinnedHostBuffer(void* data, size_t size) : data_(data), size_(size) {}
  void Release();

  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_CUDA_MEMORY_H_
