// Test helpers for kernels/cuda: skip without a usable GPU (saying why), a
// device array that copies to and from host vectors, and bit-for-bit
// comparison of the CPU's and the GPU's results.
#ifndef LOCKSTEP_KERNELS_CUDA_CUDA_TEST_UTIL_H_
#define LOCKSTEP_KERNELS_CUDA_CUDA_TEST_UTIL_H_

#include <cuda_runtime_api.h>

#include <cstring>
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

// The same bytes, element by element (so -0.0f against 0.0f and NaN
// payloads count); the first difference fails the test, naming `what` and
// the index.
template <typename T>
void ExpectSameBits(const std::vector<T>& want, const std::vector<T>& got,
                    const std::string& what = "") {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(std::memcmp(&want[i], &got[i], sizeof(T)), 0)
        << what << " at " << i << ": cpu " << want[i] << " gpu " << got[i];
  }
}

}  // namespace cuda
}  // namespace lockstep

// Skips the current test, with the reason, when no GPU is usable.
#define SKIP_WITHOUT_CUDA_DEVICE()                                     \
  do {                                                                 \
    const std::string _lockstep_why = ::lockstep::cuda::WhyNoDevice(); \
    if (!_lockstep_why.empty()) GTEST_SKIP() << _lockstep_why;         \
  } while (0)

#endif  // LOCKSTEP_KERNELS_CUDA_CUDA_TEST_UTIL_H_
