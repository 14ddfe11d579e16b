// Links and (with a GPU) runs the nvcc-built smoke kernel.
#include "kernels/cuda/build_check.h"

#include <cuda_runtime_api.h>

#include <vector>

#include "gtest/gtest.h"

namespace lockstep {
namespace cuda {
namespace {

TEST(BuildCheckTest, FillsOnTheDevice) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    GTEST_SKIP() << "no usable CUDA device: " << cudaGetErrorString(err)
                 << " (error " << static_cast<int>(err) << ")";
  }
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 1000 * sizeof(float)),
            cudaSuccess);
  ASSERT_EQ(LaunchFill(d, 1000, 2.5f, nullptr), cudaSuccess);
  std::vector<float> h(1000);
  ASSERT_EQ(
      cudaMemcpy(h.data(), d, h.size() * sizeof(float), cudaMemcpyDeviceToHost),
      cudaSuccess);
  cudaFree(d);
  for (float v : h) ASSERT_EQ(v, 2.5f);
}

}  // namespace
}  // namespace cuda
}  // namespace lockstep
