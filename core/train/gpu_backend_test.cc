// Without the CUDA build's backend (this test does not link it), every GPU
// entry point is FailedPrecondition saying how to get one.
#include "core/train/gpu_backend.h"

#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(GpuBackendTest, WithoutTheCudaBuildEveryEntrySaysHowToGetIt) {
  ASSERT_FALSE(HaveGpuBackend());
  const std::string why =
      "this lockstep was built without GPU support (build it with "
      "--config=cuda)";
  absl::StatusOr<int> gpus = VisibleGpus();
  EXPECT_EQ(gpus.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(gpus.status().message(), why + "; use cpu:N");

  GpuReplicasConfig config;
  config.devices = {0};
  config.replica_indices = {0};
  config.world_replicas = 1;
  absl::StatusOr<std::unique_ptr<GpuReplicas>> ddp = MakeGpuReplicas(config);
  EXPECT_EQ(ddp.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ddp.status().message(), "GPU replicas: " + why + "; use cpu:N");

  absl::StatusOr<std::string> id = NewNcclId();
  EXPECT_EQ(id.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(id.status().message(), "the NCCL all-reduce: " + why);
}

}  // namespace
}  // namespace lockstep
