// GPU replicas through ReplicaSet: the backend is registered by linking
// this library; without a device every path fails naming why; with one, a
// GPU replica set's steps agree with a CPU replica set's.
#include "kernels/cuda/layers/gpu_replica.h"

#include <cmath>

#include "core/batch_prefetcher.h"
#include "core/gpu_backend.h"
#include "core/replica_set.h"
#include "gtest/gtest.h"
#include "kernels/cuda/cuda_test_util.h"

namespace lockstep {
namespace cuda {
namespace {

JobSpec SmallCnn() {
  JobSpec spec;
  spec.seed = 3;
  spec.model.input_shape = {8, 8, 1};
  LayerSpec conv;
  conv.type = LayerType::kConv2D;
  conv.filters = 4;
  conv.kernel_h = 3;
  conv.kernel_w = 3;
  conv.activation = Activation::kRelu;
  LayerSpec pool;
  pool.type = LayerType::kMaxPool2D;
  LayerSpec flat;
  flat.type = LayerType::kFlatten;
  LayerSpec dense;
  dense.type = LayerType::kDense;
  dense.units = 10;
  spec.model.layers = {conv, pool, flat, dense};
  return spec;
}

TEST(GpuReplicaTest, LinkingRegistersTheGpuBackend) {
  EXPECT_TRUE(HaveGpuBackend());
  const std::string why = WhyNoDevice();
  if (why.empty()) GTEST_SKIP() << "a GPU is present: the no-device paths";
  absl::StatusOr<int> visible = VisibleGpus();
  ASSERT_FALSE(visible.ok());
  EXPECT_EQ(visible.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(visible.status().message(), why);
  absl::StatusOr<std::unique_ptr<ReplicaSet>> set =
      ReplicaSet::Create(SmallCnn(), {0}, 1, {0});
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(set.status().message().find("cuda:0"), std::string::npos)
      << set.status().message();
}

TEST(GpuReplicaTest, AGpuReplicaSetStepsLikeACpuOne) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const JobSpec spec = SmallCnn();
  absl::StatusOr<std::unique_ptr<ReplicaSet>> gpu =
      ReplicaSet::Create(spec, {0}, 1, {0});
  absl::StatusOr<std::unique_ptr<ReplicaSet>> cpu =
      ReplicaSet::Create(spec, {0}, 1);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ((*gpu)->devices(), "cuda:0");
  for (int step = 0; step < 3; ++step) {
    Batch batch;
    batch.global_step = step;
    batch.global_count = 16;
    ReplicaBatch rb;
    rb.x = Tensor({16, 8, 8, 1});
    for (int64_t i = 0; i < rb.x.size(); ++i) {
      rb.x.data()[i] = std::sin(0.37f * i + step);
    }
    for (int i = 0; i < 16; ++i) rb.labels.push_back((i * 7 + step) % 10);
    batch.replicas.push_back(rb);
    Batch batch2 = batch;
    absl::StatusOr<BatchLoss> lg =
        (*gpu)->ComputeGradients(batch, spec.loss, spec.seed);
    absl::StatusOr<BatchLoss> lc =
        (*cpu)->ComputeGradients(batch2, spec.loss, spec.seed);
    ASSERT_TRUE(lg.ok()) << lg.status();
    ASSERT_TRUE(lc.ok()) << lc.status();
    EXPECT_NEAR(lg->loss_sum, lc->loss_sum, 1e-4 * std::fabs(lc->loss_sum));
    const auto& pg = (*gpu)->params();
    const auto& pc = (*cpu)->params();
    ASSERT_EQ(pg.size(), pc.size());
    for (size_t p = 0; p < pg.size(); ++p) {
      float scale = 1e-7f;
      for (int64_t k = 0; k < pc[p]->grad.size(); ++k) {
        scale = std::max(scale, std::fabs(pc[p]->grad.data()[k]));
      }
      for (int64_t k = 0; k < pc[p]->grad.size(); ++k) {
        ASSERT_NEAR(pg[p]->grad.data()[k], pc[p]->grad.data()[k], 1e-4 * scale)
            << pc[p]->name << "[" << k << "] at step " << step;
      }
      // The same host SGD step on both, then both hand the values on.
      for (int64_t k = 0; k < pc[p]->value.size(); ++k) {
        pg[p]->value.data()[k] = pc[p]->value.data()[k] -=
            0.1f * pc[p]->grad.data()[k];
      }
    }
    ASSERT_TRUE((*gpu)->MirrorParams().ok());
    ASSERT_TRUE((*cpu)->MirrorParams().ok());
  }
}

}  // namespace
}  // namespace cuda
}  // namespace lockstep
