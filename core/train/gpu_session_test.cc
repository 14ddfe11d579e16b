// The session's side of GPU replicas, without a GPU: a GpuReplicas that
// steps on the CPU (a ReplicaSet and an Optimizer, with fp16's LossScale
// as the CUDA build's has it; the devices' own math is core/gpu's, tested
// with a device) registered as the GPU backend. fp16: a step whose sums
// overflow is logged, counted and skipped (no optimizer iteration), its
// inf loss not taken for divergence, and the loss scale goes into
// checkpoints, scalars and the result and comes back on resume. The GPUs'
// state kept in memory for a rejoin: CopyState pulls it at the step the
// devices hold, and refuses when a failed step's update had begun.
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/train/gpu_backend.h"
#include "core/train/replica_set.h"
#include "core/train/session_test_util.h"
#include "core/train/training_session.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using session_testing::Job;
using session_testing::LocalConfig;
using session_testing::MemoryHost;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::StartsWith;

struct Faults {
  int64_t overflow_step = -1;  // its summed gradients are not finite
  bool intact = true;          // StateIntact() after a failure
};

class HostGpuReplicas : public GpuReplicas {
 public:
  HostGpuReplicas(const GpuReplicasConfig& c, const Faults& faults)
      : faults_(faults), loss_scale_(c.spec.precision == Precision::kFp16) {
    absl::StatusOr<std::unique_ptr<ReplicaSet>> set =
        ReplicaSet::Create(c.spec, c.replica_indices, 1);
    EXPECT_TRUE(set.ok()) << set.status();
    set_ = *std::move(set);
    absl::StatusOr<std::unique_ptr<Optimizer>> opt =
        Optimizer::Create(c.spec.optimizer, set_->params());
    EXPECT_TRUE(opt.ok()) << opt.status();
    opt_ = *std::move(opt);
  }

  absl::StatusOr<BatchLoss> Step(Batch& batch, const Batch*, const Loss& loss,
                                 uint64_t seed, double lr) override {
    absl::StatusOr<BatchLoss> l = set_->ComputeGradients(batch, loss, seed);
    if (!l.ok()) return l;
    const bool finite = batch.global_step != faults_.overflow_step;
    if (!finite) l->loss_sum = INFINITY;  // the forward overflowed too
    if (loss_scale_.Update(finite)) {
      opt_->Apply(lr);
      absl::Status s = set_->MirrorParams();
      if (!s.ok()) return s;
    }
    return l;
  }
  absl::StatusOr<BatchLoss> Evaluate(const Dataset& data,
                                     const Loss& loss) override {
    return set_->Evaluate(data, loss);
  }
  absl::Status PullState(const std::vector<Param*>& params,
                         Optimizer& optimizer) override {
    for (size_t i = 0; i < params.size(); ++i) {
      params[i]->value = set_->params()[i]->value;
    }
    auto from = opt_->StateTensors();
    auto to = optimizer.StateTensors();
    EXPECT_EQ(from.size(), to.size());
    for (size_t k = 0; k < from.size() && k < to.size(); ++k) {
      *to[k].second = *from[k].second;
    }
    optimizer.set_iterations(opt_->iterations());
    return absl::OkStatus();
  }
  absl::Status PushState(const std::vector<Param*>& params,
                         Optimizer& optimizer) override {
    for (size_t i = 0; i < params.size(); ++i) {
      set_->params()[i]->value = params[i]->value;
    }
    auto from = optimizer.StateTensors();
    auto to = opt_->StateTensors();
    for (size_t k = 0; k < from.size() && k < to.size(); ++k) {
      *to[k].second = *from[k].second;
    }
    opt_->set_iterations(optimizer.iterations());
    return set_->MirrorParams();
  }
  LossScaleState loss_scale() const override { return loss_scale_.state(); }
  void RestoreLossScale(const LossScaleState& state) override {
    if (loss_scale_.enabled()) loss_scale_.Restore(state);
  }
  bool StateIntact() const override { return faults_.intact; }
  void Abort() override {}

 private:
  const Faults faults_;
  LossScale loss_scale_;
  std::unique_ptr<ReplicaSet> set_;
  std::unique_ptr<Optimizer> opt_;
};

// Registered for a test's life; the binary has no other backend.
class FakeGpuBackend {
 public:
  explicit FakeGpuBackend(Faults faults) {
    GpuBackend b;
    b.visible_devices = []() -> absl::StatusOr<int> { return 1; };
    b.make_replicas = [faults](const GpuReplicasConfig& c)
        -> absl::StatusOr<std::unique_ptr<GpuReplicas>> {
      return std::unique_ptr<GpuReplicas>(new HostGpuReplicas(c, faults));
    };
    b.new_nccl_id = []() -> absl::StatusOr<std::string> {
      return std::string(128, '\0');
    };
    RegisterGpuBackend(std::move(b));
  }
  ~FakeGpuBackend() { RegisterGpuBackend(GpuBackend()); }
};

class GpuHost : public MemoryHost {
 public:
  absl::StatusOr<std::string> NcclId() override {
    return std::string(128, '\0');
  }
};

SessionConfig GpuConfig(const JobSpec& spec) {
  SessionConfig c = LocalConfig(spec);
  c.cuda_devices = {0};
  return c;
}

JobSpec Fp16Job() {
  JobSpec spec = Job(1);  // 40 steps (2 epochs of 20), checkpoints every 4
  spec.precision = Precision::kFp16;
  return spec;
}

TEST(GpuSessionTest, Fp16SkipsAnOverflowedStepAndCarriesTheScale) {
  FakeGpuBackend backend(Faults{5, true});
  GpuHost host;
  auto session = TrainingSession::Create(GpuConfig(Fp16Job()), &host);
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<TrainingSession::Outcome> outcome = (*session)->Run();
  ASSERT_TRUE(outcome.ok()) << outcome.status();  // the inf loss: no divergence
  EXPECT_EQ(*outcome, TrainingSession::Outcome::kFinished);
  absl::StatusOr<SessionResult> result = (*session)->Result();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->steps, 40);
  EXPECT_EQ(result->loss_scale.scale, 32768.0);
  EXPECT_EQ(result->loss_scale.skipped_steps, 1);
  EXPECT_EQ(result->loss_scale.good_steps, 34);  // steps 6..39
  EXPECT_TRUE(std::isfinite(result->train.mean_loss()));
  EXPECT_THAT(host.logs,
              Contains(StartsWith("precision fp16 on the GPUs: matrix "
                                  "products and convolutions from "
                                  "half-rounded inputs")));
  EXPECT_THAT(host.logs,
              Contains("step 5: the fp16 gradients overflowed (inf or NaN); "
                       "the update is skipped on every rank and the loss "
                       "scale goes from 65536 to 32768"));
  // Checkpoints: the scale and the optimizer's count as of their step.
  ASSERT_EQ(host.checkpoints.count(4), 1u);
  ASSERT_EQ(host.checkpoints.count(8), 1u);
  const CheckpointState& at4 = host.checkpoints[4].state;
  EXPECT_EQ(at4.loss_scale.scale, 65536.0);
  EXPECT_EQ(at4.loss_scale.good_steps, 4);
  EXPECT_EQ(at4.optimizer_iterations, 4);
  const CheckpointState& at8 = host.checkpoints[8].state;
  EXPECT_EQ(at8.loss_scale.scale, 32768.0);
  EXPECT_EQ(at8.loss_scale.good_steps, 2);
  EXPECT_EQ(at8.loss_scale.skipped_steps, 1);
  EXPECT_EQ(at8.optimizer_iterations, 7);  // step 5 made no update
  EXPECT_EQ(host.checkpoints[40].state.optimizer_iterations, 39);
  EXPECT_EQ(host.scalars.count("loss_scale"), 1u);
  EXPECT_EQ(host.scalars.count("skipped_steps"), 1u);

  // Resumed from step 8: the scale and the count come back.
  GpuHost second;
  second.start = host.checkpoints[8];
  FakeGpuBackend clean(Faults{});
  auto resumed = TrainingSession::Create(GpuConfig(Fp16Job()), &second);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_TRUE((*resumed)->Run().ok());
  absl::StatusOr<SessionResult> again = (*resumed)->Result();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->loss_scale.scale, 32768.0);
  EXPECT_EQ(again->loss_scale.skipped_steps, 1);
  EXPECT_EQ(again->loss_scale.good_steps, 34);
  EXPECT_EQ(second.checkpoints[40].state.optimizer_iterations, 39);
}

TEST(GpuSessionTest, Fp32JobsHaveNoLossScale) {
  FakeGpuBackend backend(Faults{});
  GpuHost host;
  auto session = TrainingSession::Create(GpuConfig(Job(1)), &host);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Run().ok());
  absl::StatusOr<SessionResult> result = (*session)->Result();
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->loss_scale.scale, 0.0);
  EXPECT_EQ(host.checkpoints[20].state.loss_scale.scale, 0.0);
  EXPECT_EQ(host.checkpoints[20].state.optimizer_iterations, 20);
  EXPECT_EQ(host.scalars.count("loss_scale"), 0u);
}

TEST(GpuSessionTest, CopyStatePullsTheDevicesStateOrSaysWhyNot) {
  for (bool intact : {true, false}) {
    SCOPED_TRACE(intact);
    FakeGpuBackend backend(Faults{3, intact});
    GpuHost host;
    host.stop_after = 6;
    auto session = TrainingSession::Create(GpuConfig(Fp16Job()), &host);
    ASSERT_TRUE(session.ok()) << session.status();
    EXPECT_TRUE((*session)->state_in_memory());
    absl::StatusOr<TrainingSession::Outcome> outcome = (*session)->Run();
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    EXPECT_EQ(*outcome, TrainingSession::Outcome::kStopped);
    absl::StatusOr<std::vector<LoadedCheckpoint>> kept =
        (*session)->CopyState();
    if (!intact) {
      EXPECT_EQ(kept.status().code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_THAT(kept.status().message(),
                  HasSubstr("the step's update had begun on a device"));
      continue;
    }
    ASSERT_TRUE(kept.ok()) << kept.status();
    ASSERT_EQ(kept->size(), 1u);
    const LoadedCheckpoint& c = kept->front();
    EXPECT_EQ(c.state.step, 6);
    EXPECT_EQ(c.state.optimizer_iterations, 5);  // step 3 skipped
    EXPECT_EQ(c.state.loss_scale.skipped_steps, 1);
    EXPECT_FALSE(c.model.empty());
    EXPECT_EQ(c.optimizer.size(), 2 * c.model.size());  // Adam's m and v
    // The same bytes as the checkpoint the session writes at its stop.
    ASSERT_TRUE((*session)->SaveCheckpoint().ok());
    const LoadedCheckpoint& saved = host.checkpoints.at(6);
    ASSERT_EQ(saved.model.size(), c.model.size());
    for (size_t i = 0; i < c.model.size(); ++i) {
      EXPECT_EQ(saved.model[i].first, c.model[i].first);
      EXPECT_EQ(std::vector<float>(saved.model[i].second.data(),
                                   saved.model[i].second.data() +
                                       saved.model[i].second.size()),
                std::vector<float>(
                    c.model[i].second.data(),
                    c.model[i].second.data() + c.model[i].second.size()));
    }
  }
}

}  // namespace
}  // namespace lockstep
