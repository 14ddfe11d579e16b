// Test helpers for kernels/cuda/layers (//kernels/cuda:cuda_test_util is
// private to its package): skip without a usable GPU, and device arrays.
#ifndef LOCKSTEP_KERNELS_CUDA_LAYERS_GPU_TEST_UTIL_H_
#define LOCKSTEP_KERNELS_CUDA_LAYERS_GPU_TEST_UTIL_H_

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/device.h"

namespace lockstep {
namespace cuda {

// "" when cuda:0 is usable, else VisibleDevices' reason.
inline std::string WhyNoDevice() {
  absl::StatusOr<std::vector<DeviceInfo>> devices = VisibleDevices();
  return devices.ok() ? "" : std::string(devices.status().message());
}

// A device copy of a host vector; frees itself. Test-only: asserts instead
// of returning statuses.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) : size_(host.size()) {
    EXPECT_EQ(cudaMalloc(&ptr_, bytes() > 0 ? bytes() : 1), cudaSuccess);
    if (bytes() > 0) {
      EXPECT_EQ(cudaMemcpy(ptr_, host.data(), bytes(), cudaMemcpyHostToDevice),
                cudaSuccess);
    }
  }
  explicit DeviceArray(size_t n) : DeviceArray(std::vector<T>(n)) {}
  ~DeviceArray() { cudaFree(ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return size_ * sizeof(T); }
  // Waits for the device, then copies back.
  std::vector<T> ToHost() const {
    std::vector<T> host(size_);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (bytes() > 0) {
      EXPECT_EQ(cudaMemcpy(host.data(), ptr_, bytes(), cudaMemcpyDeviceToHost),
                cudaSuccess);
    }
    return host;
  }

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace cuda
}  // namespace lockstep

// Skips the current test, with the reason, when no GPU is usable.
#define SKIP_WITHOUT_CUDA_DEVICE()                                     \
  do {                                                                 \
    const std::string _lockstep_why = ::lockstep::cuda::WhyNoDevice(); \
    if (!_lockstep_why.empty()) GTEST_SKIP() << _lockstep_why;         \
  } while (0)

#endif  // LOCKSTEP_KERNELS_CUDA_LAYERS_GPU_TEST_UTIL_H_
