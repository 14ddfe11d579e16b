// VisibleDevices on whatever machine runs the test: with no GPU it checks the
// error text; with one it checks the reported properties.
#include "kernels/cuda/device.h"

#include <cuda_runtime_api.h>

#include <iostream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace cuda {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(DeviceTest, NoDeviceReasonsAreWords) {
  EXPECT_EQ(NoDeviceReason(cudaErrorInsufficientDriver),
            "no usable CUDA device: CUDA driver is older than the runtime or "
            "missing (cudaErrorInsufficientDriver, error 35)");
  EXPECT_EQ(NoDeviceReason(cudaErrorNoDevice),
            "no usable CUDA device: the driver sees no CUDA-capable device "
            "(cudaErrorNoDevice, error 100)");
  EXPECT_THAT(NoDeviceReason(cudaErrorUnknown),
              HasSubstr("(cudaErrorUnknown, error 999)"));
}

// Runs where no GPU is usable (this build machine): the error says why.
TEST(DeviceTest, WithoutGpuSaysWhy) {
  absl::StatusOr<std::vector<DeviceInfo>> devices = VisibleDevices();
  if (devices.ok()) {
    GTEST_SKIP() << "a CUDA device is present (" << devices->size()
                 << " visible): the no-device error is not reachable";
  }
  EXPECT_EQ(devices.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(devices.status().message()),
              StartsWith("no usable CUDA device: "));
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaErrorInsufficientDriver) {
    EXPECT_EQ(devices.status().message(),
              "no usable CUDA device: CUDA driver is older than the runtime "
              "or missing (cudaErrorInsufficientDriver, error 35)");
  }
  absl::StatusOr<DeviceList> empty = ResolveDeviceList("", DeviceList::Cpu(2));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(*empty, DeviceList::Cpu(2));
  absl::StatusOr<DeviceList> gpu = ResolveDeviceList("cuda:0", DeviceList());
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(gpu.status().message()),
              HasSubstr("device entry 'cuda:0': no CUDA device is visible: "
                        "no usable CUDA device: "));
}

TEST(DeviceTest, WithGpuReportsProperties) {
  absl::StatusOr<std::vector<DeviceInfo>> devices = VisibleDevices();
  if (!devices.ok()) GTEST_SKIP() << devices.status().message();
  ASSERT_FALSE(devices->empty());
  for (size_t i = 0; i < devices->size(); ++i) {
    const DeviceInfo& d = (*devices)[i];
    EXPECT_EQ(d.ordinal, static_cast<int>(i));
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.total_memory_bytes, int64_t{1} << 30);
    EXPECT_GT(d.compute_major, 0);
    EXPECT_GT(d.multiprocessors, 0);
    EXPECT_THAT(d.ToString(), StartsWith("cuda:" + std::to_string(i) + " "));
    std::cout << d.ToString() << "\n";
  }
  absl::StatusOr<DeviceList> all = ResolveDeviceList("", DeviceList::Cpu(2));
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->kind, DeviceKind::kCuda);
  EXPECT_EQ(all->replicas(), static_cast<int>(devices->size()));
  absl::StatusOr<DeviceList> gpu = ResolveDeviceList("cuda:0", DeviceList());
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ(*gpu, DeviceList::Cuda({0}));
}

TEST(DeviceTest, CpuListNeedsNoGpu) {
  absl::StatusOr<DeviceList> cpu = ResolveDeviceList("cpu:3", DeviceList());
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(*cpu, DeviceList::Cpu(3));
}

}  // namespace
}  // namespace cuda
}  // namespace lockstep
