#include "client/device_flags.h"

#include "core/train/gpu_backend.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(DeviceFlagsTest, CpuReplicasByDefaultAndByFlag) {
  absl::StatusOr<DeviceList> none = ResolveDevices("", 3);
  ASSERT_TRUE(none.ok()) << none.status();
  if (!HaveGpuBackend()) {
    EXPECT_EQ(none->ToString(), "cpu:3");
  }
  absl::StatusOr<DeviceList> two = ResolveDevices("cpu:2", 1);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->replicas(), 2);
  EXPECT_EQ(two->ToString(), "cpu:2");
}

TEST(DeviceFlagsTest, BadEntriesAreNamed) {
  absl::StatusOr<DeviceList> bad = ResolveDevices("cpu:0", 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message().substr(0, 18), "--devices \"cpu:0\":");
  absl::StatusOr<DeviceList> tpu = ResolveDevices("tpu:0", 1);
  ASSERT_FALSE(tpu.ok());
  EXPECT_NE(tpu.status().message().find("tpu"), std::string::npos)
      << tpu.status().message();
}

TEST(DeviceFlagsTest, GpusWithoutTheCudaBuildSaySo) {
  if (HaveGpuBackend()) GTEST_SKIP() << "this binary has GPU replicas";
  absl::StatusOr<DeviceList> gpu = ResolveDevices("cuda:0", 1);
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(gpu.status().message(),
            "--devices cuda:0: this lockstep was built without GPU support "
            "(build it with --config=cuda); use cpu:N");
}

}  // namespace
}  // namespace lockstep
