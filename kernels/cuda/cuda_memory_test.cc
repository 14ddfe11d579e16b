// Device memory and pinned buffers on the real runtime: without a GPU they
// must fail with the driver's reason; with one, round-trip data.
#include "kernels/cuda/cuda_memory.h"

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device.h"

namespace lockstep {
namespace cuda {
namespace {

using ::testing::HasSubstr;

bool HaveDevice(std::string* why) {
  absl::StatusOr<std::vector<DeviceInfo>> devices = VisibleDevices();
  if (!devices.ok()) *why = std::string(devices.status().message());
  return devices.ok();
}

TEST(CudaMemoryTest, WithoutGpuFailsWithTheReason) {
  std::string why;
  if (HaveDevice(&why)) GTEST_SKIP() << "a CUDA device is present";
  std::unique_ptr<CachingAllocator> alloc = NewDeviceAllocator(0);
  absl::StatusOr<void*> p = alloc->Allocate(4096, nullptr);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(p.status().message()),
              HasSubstr("cudaSetDevice(device_) at kernels/cuda/"
                        "cuda_memory.cc:"));
  absl::StatusOr<PinnedHostBuffer> pinned = PinnedHostBuffer::Create(4096);
  ASSERT_FALSE(pinned.ok());
  EXPECT_EQ(pinned.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(pinned.status().message()),
              HasSubstr("cudaHostAlloc"));
  EXPECT_EQ(alloc->stats().bytes_in_use, 0);
}

TEST(CudaMemoryTest, EmptyPinnedBufferNeedsNoDevice) {
  absl::StatusOr<PinnedHostBuffer> pinned = PinnedHostBuffer::Create(0);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_EQ(pinned->data(), nullptr);
  EXPECT_EQ(pinned->size(), 0u);
}

TEST(CudaMemoryTest, WithGpuRoundTripsThroughCachedBlocks) {
  std::string why;
  if (!HaveDevice(&why)) GTEST_SKIP() << why;
  std::unique_ptr<CachingAllocator> alloc = NewDeviceAllocator(0);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  absl::StatusOr<PinnedHostBuffer> host = PinnedHostBuffer::Create(1 << 20);
  ASSERT_TRUE(host.ok()) << host.status();
  for (int i = 0; i < (1 << 18); ++i) host->as<float>()[i] = i * 0.5f;
  absl::StatusOr<void*> dev = alloc->Allocate(1 << 20, stream);
  ASSERT_TRUE(dev.ok()) << dev.status();
  ASSERT_EQ(cudaMemcpyAsync(*dev, host->data(), 1 << 20, cudaMemcpyHostToDevice,
                            stream),
            cudaSuccess);
  std::vector<float> back(1 << 18);
  ASSERT_EQ(cudaMemcpyAsync(back.data(), *dev, 1 << 20, cudaMemcpyDeviceToHost,
                            stream),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  for (int i = 0; i < (1 << 18); ++i) ASSERT_EQ(back[i], i * 0.5f);
  ASSERT_TRUE(alloc->Free(*dev).ok());
  absl::StatusOr<void*> again = alloc->Allocate(1 << 20, stream);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *dev);
  ASSERT_TRUE(alloc->Free(*again).ok());
  EXPECT_TRUE(alloc->EmptyCache().ok());
  EXPECT_EQ(alloc->stats().bytes_cached, 0);
  cudaStreamDestroy(stream);
}

// A DeviceBuffer is zeroed, left current by Create and freed on its own
// device, the thread's device put back (a lane's buffer freed from another
// GPU's thread must not move that thread's later launches).
TEST(CudaMemoryTest, DeviceBufferIsZeroAndFreedOnItsDevice) {
  std::string why;
  if (!HaveDevice(&why)) GTEST_SKIP() << why;
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  const int last = count - 1;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  absl::StatusOr<std::unique_ptr<DeviceBuffer<float>>> buffer =
      DeviceBuffer<float>::Create(last, 1000);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, last);
  std::vector<float> back(1000, 1.0f);
  ASSERT_EQ(cudaMemcpy(back.data(), (*buffer)->get(), sizeof(float) * 1000,
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(back, std::vector<float>(1000, 0.0f));
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  buffer->reset();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  if (count < 2) {
    GTEST_SKIP() << "the device put back after the free needs two GPUs to "
                    "be told from the buffer's (one here)";
  }
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 0) << "freeing a buffer of cuda:" << last;
}

TEST(CudaMemoryTest, WithGpuOutOfMemoryIsResourceExhausted) {
  std::string why;
  if (!HaveDevice(&why)) GTEST_SKIP() << why;
  std::unique_ptr<CachingAllocator> alloc = NewDeviceAllocator(0);
  absl::StatusOr<void*> p = alloc->Allocate(size_t{1} << 50, nullptr);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(p.status().message()),
              HasSubstr("cudaErrorMemoryAllocation"));
  // Not sticky: the device still works.
  absl::StatusOr<void*> small = alloc->Allocate(4096, nullptr);
  ASSERT_TRUE(small.ok()) << small.status();
  ASSERT_TRUE(alloc->Free(*small).ok());
}

}  // namespace
}  // namespace cuda
}  // namespace lockstep
