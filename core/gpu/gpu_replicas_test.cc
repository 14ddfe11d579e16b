// The CUDA GpuReplicas: linking registers it; without a device make()
// fails naming why; with one, a world of one rank steps like a CPU
// ReplicaSet plus core Optimizer, and PushState/PullState round-trip.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/data/batch_prefetcher.h"
#include "core/gpu/gpu_replicas_cuda.h"
#include "core/model/model.h"
#include "core/train/gpu_backend.h"
#include "core/train/optimizer.h"
#include "core/train/replica_set.h"
#include "gtest/gtest.h"
#include "kernels/cuda/cuda_test_util.h"
#include "kernels/cuda/nccl_communicator.h"

namespace lockstep {
namespace cuda {
namespace {

JobSpec SmallDense(OptimizerType type, double momentum) {
  JobSpec spec;
  spec.seed = 5;
  spec.model = *ParseModelSpec(R"({"input_shape": [12], "layers": [
      {"type": "dense", "units": 16, "activation": "relu"},
      {"type": "dense", "units": 4, "activation": "softmax"}]})");
  spec.optimizer.type = type;
  spec.optimizer.learning_rate = 0.05;
  spec.optimizer.momentum = momentum;
  return spec;
}

GpuReplicasConfig OneRank(const JobSpec& spec, std::string id) {
  GpuReplicasConfig config;
  config.spec = spec;
  config.devices = {0};
  config.replica_indices = {0};
  config.world_replicas = 1;
  config.nccl_id = std::move(id);
  config.timeout = absl::Seconds(30);
  return config;
}

Batch MakeTestBatch(int64_t step) {
  Batch batch;
  batch.global_step = step;
  batch.global_count = 16;
  batch.global_labels = 16;
  ReplicaBatch rb;
  rb.x = Tensor({16, 12});
  for (int64_t i = 0; i < rb.x.size(); ++i) {
    rb.x.data()[i] = std::sin(0.37f * i + step);
  }
  for (int i = 0; i < 16; ++i) rb.labels.push_back((i * 3 + step) % 4);
  batch.replicas.push_back(rb);
  return batch;
}

using HostSum = std::function<absl::Status(int64_t, float*, int64_t)>;

// One rank of the ring layout on cuda:0: its local sum goes to `hook`.
std::unique_ptr<GpuReplicas> RingRank(const JobSpec& spec, HostSum hook,
                                      bool keep_state = false) {
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  EXPECT_TRUE(id.ok()) << id.status();
  GpuReplicasConfig c = OneRank(spec, id.ok() ? *id : "");
  c.host_all_reduce = std::move(hook);
  c.keep_state = keep_state;
  absl::StatusOr<std::unique_ptr<GpuReplicas>> d = MakeGpuReplicas(c);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *std::move(d) : nullptr;
}

TEST(DeviceDataParallelTest, LinkingRegistersTheBackend) {
  EXPECT_TRUE(HaveGpuBackend());
}

TEST(DeviceDataParallelTest, RefusesABadConfig) {
  GpuReplicasConfig config =
      OneRank(SmallDense(OptimizerType::kAdam, 0), std::string(128, '\0'));
  config.replica_indices = {0, 1};
  absl::StatusOr<std::unique_ptr<GpuReplicas>> d = MakeGpuReplicas(config);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(d.status().message(),
            "GpuReplicas: 1 devices but 2 replica indices");
  config.replica_indices = {1};
  d = MakeGpuReplicas(config);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(d.status().message(),
            "GpuReplicas: replica index 1 outside the world of 1");
}

TEST(DeviceDataParallelTest, WithoutADeviceMakeFailsNamingIt) {
  const std::string why = WhyNoDevice();
  if (why.empty()) GTEST_SKIP() << "a GPU is present: the no-device path";
  absl::StatusOr<std::unique_ptr<GpuReplicas>> d = MakeGpuReplicas(
      OneRank(SmallDense(OptimizerType::kAdam, 0), std::string(128, '\0')));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(d.status().message().find("cuda:0"), std::string::npos)
      << d.status().message();
  EXPECT_NE(d.status().message().find("no usable CUDA device"),
            std::string::npos)
      << d.status().message();
}

void ExpectClose(const std::vector<Param*>& got,
                 const std::vector<Param*>& want, int step) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t p = 0; p < got.size(); ++p) {
    ASSERT_EQ(got[p]->value.size(), want[p]->value.size());
    for (int64_t j = 0; j < got[p]->value.size(); ++j) {
      const float w = want[p]->value.data()[j];
      ASSERT_NEAR(got[p]->value.data()[j], w,
                  1e-5f * std::max(1.0f, std::fabs(w)))
          << "step " << step << " " << want[p]->name << "[" << j << "]";
    }
  }
}

struct StepCase {
  std::string name;
  OptimizerType type;
  double weight_decay = 0;
  std::vector<std::string> exclude_from_weight_decay;
  double global_clipnorm = 0;
};

class DeviceDataParallelStepTest : public ::testing::TestWithParam<StepCase> {};

TEST_P(DeviceDataParallelStepTest, OneRankStepsLikeTheCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const StepCase& c = GetParam();
  JobSpec spec = SmallDense(c.type, 0.9);
  spec.optimizer.weight_decay = c.weight_decay;
  spec.optimizer.exclude_from_weight_decay = c.exclude_from_weight_decay;
  spec.optimizer.global_clipnorm = c.global_clipnorm;
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  absl::StatusOr<std::unique_ptr<GpuReplicas>> gpu =
      MakeGpuReplicas(OneRank(spec, *id));
  ASSERT_TRUE(gpu.ok()) << gpu.status();

  absl::StatusOr<std::unique_ptr<ReplicaSet>> cpu =
      ReplicaSet::Create(spec, {0}, 1);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  absl::StatusOr<std::unique_ptr<Optimizer>> cpu_opt =
      Optimizer::Create(spec.optimizer, (*cpu)->params());
  ASSERT_TRUE(cpu_opt.ok()) << cpu_opt.status();

  // Where PullState lands.
  absl::StatusOr<std::unique_ptr<Model>> pulled =
      Model::Build(spec.model, spec.seed);
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  absl::StatusOr<std::unique_ptr<Optimizer>> pulled_opt =
      Optimizer::Create(spec.optimizer, (*pulled)->params());
  ASSERT_TRUE(pulled_opt.ok()) << pulled_opt.status();

  const uint64_t seed = 11;
  // Steps 0-3 stage the next batch during the step (step 2 is followed by
  // an evaluation, which reuses the staging slots: step 3 stages again);
  // step 4 has no next batch.
  Dataset eval_data;
  eval_data.sample_shape = {12};
  eval_data.num_samples = 1500;  // two chunks, the second partial
  eval_data.num_classes = 4;
  for (int64_t i = 0; i < eval_data.num_samples * 12; ++i) {
    eval_data.features.push_back(std::cos(0.11f * i));
  }
  for (int64_t i = 0; i < eval_data.num_samples; ++i) {
    eval_data.labels.push_back(i % 4);
  }
  Batch next = MakeTestBatch(0);
  for (int step = 0; step < 5; ++step) {
    const double lr = 0.05 / (1 + step);
    Batch gb = std::move(next);
    next = MakeTestBatch(step + 1);
    Batch cb = MakeTestBatch(step);
    absl::StatusOr<BatchLoss> lg =
        (*gpu)->Step(gb, step < 4 ? &next : nullptr, *spec.loss, seed, lr);
    ASSERT_TRUE(lg.ok()) << lg.status();
    absl::StatusOr<BatchLoss> lc =
        (*cpu)->ComputeGradients(cb, *spec.loss, seed);
    ASSERT_TRUE(lc.ok()) << lc.status();
    (*cpu_opt)->Apply(lr);
    if (c.global_clipnorm > 0) {
      // The case clips at every step (else it would test nothing).
      EXPECT_GT((*cpu_opt)->last_grad_norm(), c.global_clipnorm)
          << "step " << step;
    }
    EXPECT_NEAR(lg->loss_sum, lc->loss_sum,
                1e-5 * std::max(1.0, std::fabs(lc->loss_sum)));
    EXPECT_EQ(lg->count, lc->count);

    ASSERT_TRUE((*gpu)->PullState((*pulled)->params(), **pulled_opt).ok());
    EXPECT_EQ((*pulled_opt)->iterations(), step + 1);
    ExpectClose((*pulled)->params(), (*cpu)->params(), step);
    std::vector<std::pair<std::string, Tensor*>> got =
        (*pulled_opt)->StateTensors();
    std::vector<std::pair<std::string, Tensor*>> want =
        (*cpu_opt)->StateTensors();
    ASSERT_EQ(got.size(), want.size());
    ASSERT_FALSE(got.empty());
    for (size_t k = 0; k < got.size(); ++k) {
      ASSERT_EQ(got[k].first, want[k].first);
      for (int64_t j = 0; j < got[k].second->size(); ++j) {
        const float w = want[k].second->data()[j];
        ASSERT_NEAR(got[k].second->data()[j], w,
                    1e-5f * std::max(1.0f, std::fabs(w)))
            << "step " << step << " " << want[k].first << "[" << j << "]";
      }
    }
    if (step == 2) {
      // Evaluation on the device agrees with the CPU model's.
      absl::StatusOr<BatchLoss> eg = (*gpu)->Evaluate(eval_data, *spec.loss);
      absl::StatusOr<BatchLoss> ec = (*cpu)->Evaluate(eval_data, *spec.loss);
      ASSERT_TRUE(eg.ok()) << eg.status();
      ASSERT_TRUE(ec.ok()) << ec.status();
      EXPECT_EQ(eg->count, ec->count);
      EXPECT_NEAR(eg->loss_sum, ec->loss_sum, 1e-4 * std::fabs(ec->loss_sum));
    }
  }

  (*gpu)->Abort();
  Batch gb = MakeTestBatch(5);
  EXPECT_EQ((*gpu)->Step(gb, nullptr, *spec.loss, seed, 0.01).status().code(),
            absl::StatusCode::kCancelled);
}

// The BERT example's optimizer: AdamW with decay on kernels only (biases
// excluded by name) and clipping by the global norm, as on the CPU. The
// decay is large (0.5 x lr per step) so that decaying a bias would move it
// past the tolerance.
INSTANTIATE_TEST_SUITE_P(
    Optimizers, DeviceDataParallelStepTest,
    ::testing::Values(
        StepCase{"sgd_momentum", OptimizerType::kSgd},
        StepCase{"adam", OptimizerType::kAdam},
        StepCase{
            "sgd_clip_decay_kernels", OptimizerType::kSgd, 0.5, {"bias"}, 0.05},
        StepCase{"adamw_clip_decay_kernels",
                 OptimizerType::kAdamW,
                 0.5,
                 {"bias"},
                 0.05}),
    [](const ::testing::TestParamInfo<StepCase>& info) {
      return info.param.name;
    });

TEST(DeviceDataParallelTest, PushThenPullIsExact) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const JobSpec spec = SmallDense(OptimizerType::kAdamW, 0);
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  absl::StatusOr<std::unique_ptr<GpuReplicas>> gpu =
      MakeGpuReplicas(OneRank(spec, *id));
  ASSERT_TRUE(gpu.ok()) << gpu.status();

  absl::StatusOr<std::unique_ptr<Model>> src =
      Model::Build(spec.model, spec.seed);
  absl::StatusOr<std::unique_ptr<Model>> dst =
      Model::Build(spec.model, spec.seed + 1);
  ASSERT_TRUE(src.ok() && dst.ok());
  absl::StatusOr<std::unique_ptr<Optimizer>> src_opt =
      Optimizer::Create(spec.optimizer, (*src)->params());
  absl::StatusOr<std::unique_ptr<Optimizer>> dst_opt =
      Optimizer::Create(spec.optimizer, (*dst)->params());
  ASSERT_TRUE(src_opt.ok() && dst_opt.ok());
  float v = 0.5f;
  for (Param* p : (*src)->params()) {
    for (int64_t j = 0; j < p->value.size(); ++j)
      p->value.data()[j] = v += 0.01f;
  }
  for (auto& [name, t] : (*src_opt)->StateTensors()) {
    for (int64_t j = 0; j < t->size(); ++j) t->data()[j] = v -= 0.003f;
  }
  (*src_opt)->set_iterations(7);

  ASSERT_TRUE((*gpu)->PushState((*src)->params(), **src_opt).ok());
  ASSERT_TRUE((*gpu)->PullState((*dst)->params(), **dst_opt).ok());
  EXPECT_EQ((*dst_opt)->iterations(), 7);
  const std::vector<Param*>& a = (*src)->params();
  const std::vector<Param*>& b = (*dst)->params();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i]->value.size(), b[i]->value.size());
    EXPECT_EQ(0, std::memcmp(a[i]->value.data(), b[i]->value.data(),
                             sizeof(float) * a[i]->value.size()))
        << a[i]->name;
  }
  std::vector<std::pair<std::string, Tensor*>> sa = (*src_opt)->StateTensors();
  std::vector<std::pair<std::string, Tensor*>> sb = (*dst_opt)->StateTensors();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t k = 0; k < sa.size(); ++k) {
    EXPECT_EQ(0, std::memcmp(sa[k].second->data(), sb[k].second->data(),
                             sizeof(float) * sa[k].second->size()))
        << sa[k].first;
  }

  // An optimizer of another type does not match the device state.
  OptimizerSpec sgd;
  sgd.type = OptimizerType::kSgd;
  sgd.momentum = 0.5;
  absl::StatusOr<std::unique_ptr<Optimizer>> other =
      Optimizer::Create(sgd, (*dst)->params());
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*gpu)->PullState((*dst)->params(), **other).code(),
            absl::StatusCode::kInvalidArgument);
}

// The ring layout: host_all_reduce sees each step's local sum in host
// memory (the flat layout, its real elements equal to the plain path's
// gradients) and what it leaves there is what the update uses: an identity
// hook trains exactly as the plain layout does, and a hook that doubles the
// sum (a second worker with the same gradients) at half the learning rate
// ends where the plain layout does (plain SGD: 2g at lr/2 is g at lr).
TEST(DeviceDataParallelTest, HostAllReduceSeesTheSumAndItsResultIsApplied) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const JobSpec spec = SmallDense(OptimizerType::kSgd, 0);
  auto make = [&](HostSum hook) { return RingRank(spec, std::move(hook)); };
  std::vector<int64_t> seen_steps;
  int64_t seen_floats = 0;
  std::unique_ptr<GpuReplicas> plain = make(nullptr);
  std::unique_ptr<GpuReplicas> identity =
      make([&](int64_t step, float*, int64_t floats) {
        seen_steps.push_back(step);
        seen_floats = floats;
        return absl::OkStatus();
      });
  std::unique_ptr<GpuReplicas> doubled =
      make([](int64_t, float* g, int64_t floats) {
        for (int64_t i = 0; i < floats; ++i) g[i] *= 2.0f;
        return absl::OkStatus();
      });
  ASSERT_TRUE(plain && identity && doubled);
  for (int step = 0; step < 3; ++step) {
    Batch a = MakeTestBatch(step), b = MakeTestBatch(step),
          c = MakeTestBatch(step);
    ASSERT_TRUE(plain->Step(a, nullptr, *spec.loss, 1, 0.05).ok());
    ASSERT_TRUE(identity->Step(b, nullptr, *spec.loss, 1, 0.05).ok());
    ASSERT_TRUE(doubled->Step(c, nullptr, *spec.loss, 1, 0.025).ok());
  }
  EXPECT_EQ(seen_steps, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_GE(seen_floats, 12 * 16 + 16 + 16 * 4 + 4);  // padded flat layout

  auto pull = [&](GpuReplicas& ddp) {
    absl::StatusOr<std::unique_ptr<Model>> m =
        Model::Build(spec.model, spec.seed + 9);
    absl::StatusOr<std::unique_ptr<Optimizer>> o =
        Optimizer::Create(spec.optimizer, (*m)->params());
    EXPECT_TRUE(ddp.PullState((*m)->params(), **o).ok());
    std::vector<float> all;
    for (Param* p : (*m)->params()) {
      all.insert(all.end(), p->value.data(), p->value.data() + p->value.size());
    }
    return all;
  };
  const std::vector<float> want = pull(*plain);
  EXPECT_EQ(pull(*identity), want);
  // 2 x g at lr/2 is g at lr, up to the rounding of the product.
  const std::vector<float> got = pull(*doubled);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-6f * std::max(1.0f, std::fabs(want[i])))
        << i;
  }

  // A failing hook fails the step with its error, and every later one.
  std::unique_ptr<GpuReplicas> failing = make([](int64_t, float*, int64_t) {
    return absl::UnavailableError("ring peer gone");
  });
  ASSERT_TRUE(failing);
  Batch e = MakeTestBatch(0), f = MakeTestBatch(1);
  absl::StatusOr<BatchLoss> r = failing->Step(e, nullptr, *spec.loss, 1, 0.05);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_EQ(r.status().message(), "ring peer gone");
  EXPECT_EQ(failing->Step(f, nullptr, *spec.loss, 1, 0.05).status(),
            r.status());
}

// A rank keeps its GPUs' state for a rejoin: the ring's sum failing at
// step 2 leaves every device as after step 1 (no update began), so after
// the failure and Abort() PullState reads exactly the state of step 1
// (the parameters and Adam's slots and count of a run stopped there).
TEST(DeviceDataParallelTest, AFailedSumLeavesTheStateIntactForARejoin) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const JobSpec spec = SmallDense(OptimizerType::kAdam, 0);
  auto make = [&](HostSum hook) {
    return RingRank(spec, std::move(hook), /*keep_state=*/true);
  };
  std::unique_ptr<GpuReplicas> reference =
      make([](int64_t, float*, int64_t) { return absl::OkStatus(); });
  std::unique_ptr<GpuReplicas> failing =
      make([](int64_t step, float*, int64_t) {
        return step == 2 ? absl::UnavailableError("ring peer gone")
                         : absl::OkStatus();
      });
  ASSERT_TRUE(reference && failing);
  for (int step = 0; step < 2; ++step) {
    Batch a = MakeTestBatch(step), b = MakeTestBatch(step);
    ASSERT_TRUE(reference->Step(a, nullptr, *spec.loss, 1, 0.003).ok());
    ASSERT_TRUE(failing->Step(b, nullptr, *spec.loss, 1, 0.003).ok());
  }
  EXPECT_TRUE(failing->StateIntact());
  Batch c = MakeTestBatch(2);
  EXPECT_EQ(failing->Step(c, nullptr, *spec.loss, 1, 0.003).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_TRUE(failing->StateIntact());
  failing->Abort();
  auto pull = [&](GpuReplicas& g, std::vector<float>* slots) {
    absl::StatusOr<std::unique_ptr<Model>> m =
        Model::Build(spec.model, spec.seed + 3);
    absl::StatusOr<std::unique_ptr<Optimizer>> o =
        Optimizer::Create(spec.optimizer, (*m)->params());
    const absl::Status s = g.PullState((*m)->params(), **o);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_EQ((*o)->iterations(), 2);
    for (auto& [name, t] : (*o)->StateTensors()) {
      slots->insert(slots->end(), t->data(), t->data() + t->size());
    }
    std::vector<float> all;
    for (Param* p : (*m)->params()) {
      all.insert(all.end(), p->value.data(), p->value.data() + p->value.size());
    }
    return all;
  };
  std::vector<float> want_slots, got_slots;
  const std::vector<float> want = pull(*reference, &want_slots);
  EXPECT_EQ(pull(*failing, &got_slots), want);
  EXPECT_EQ(got_slots, want_slots);
}

// Gradient accumulation on a GPU: each step's 16 samples as 2
// micro-batches of 8, their gradients added up on the device before the
// update, as the CPU ReplicaSet adds them (the same micro-batches, the
// same dropout seeds): Adam's parameters within 1e-5 of the CPU's after 3
// steps, and the losses of both micro-batches counted.
TEST(DeviceDataParallelTest, AccumulatesMicroBatchesAsTheCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  JobSpec spec = SmallDense(OptimizerType::kAdam, 0);
  spec.batch_size_per_replica = 8;
  spec.gradient_accumulation_steps = 2;
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  GpuReplicasConfig c = OneRank(spec, *id);
  c.micros = 2;
  absl::StatusOr<std::unique_ptr<GpuReplicas>> gpu = MakeGpuReplicas(c);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  absl::StatusOr<std::unique_ptr<ReplicaSet>> cpu =
      ReplicaSet::Create(spec, {0}, 1);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  absl::StatusOr<std::unique_ptr<Optimizer>> opt =
      Optimizer::Create(spec.optimizer, (*cpu)->params());
  ASSERT_TRUE(opt.ok()) << opt.status();
  for (int step = 0; step < 3; ++step) {
    Batch gb = MakeTestBatch(step), next = MakeTestBatch(step + 1);
    absl::StatusOr<BatchLoss> lg =
        (*gpu)->Step(gb, &next, *spec.loss, 7, 0.003);
    ASSERT_TRUE(lg.ok()) << lg.status();
    const Batch whole = MakeTestBatch(step);
    BatchLoss lc;
    for (int32_t k = 0; k < 2; ++k) {
      Batch mb = MicroBatch(whole, k, 2, 8);
      absl::StatusOr<BatchLoss> part =
          (*cpu)->ComputeGradients(mb, *spec.loss, 7);
      ASSERT_TRUE(part.ok()) << part.status();
      lc += *part;
    }
    (*opt)->Apply(0.003);
    EXPECT_EQ(lg->count, 16);
    EXPECT_EQ(lg->count, lc.count);
    EXPECT_NEAR(lg->loss_sum, lc.loss_sum,
                1e-5 * std::max(1.0, std::fabs(lc.loss_sum)));
  }
  absl::StatusOr<std::unique_ptr<Model>> pulled =
      Model::Build(spec.model, spec.seed);
  ASSERT_TRUE(pulled.ok());
  absl::StatusOr<std::unique_ptr<Optimizer>> pulled_opt =
      Optimizer::Create(spec.optimizer, (*pulled)->params());
  ASSERT_TRUE(pulled_opt.ok());
  ASSERT_TRUE((*gpu)->PullState((*pulled)->params(), **pulled_opt).ok());
  EXPECT_EQ((*pulled_opt)->iterations(), 3);
  ExpectClose((*pulled)->params(), (*cpu)->params(), 3);
}

// Two workers' GPU ranks in the ring layout (both on cuda:0 here), their
// host sums meeting in the test: each deposits its local sum, both add the
// two in rank order (the same bits on each), as the gRPC ring hands every
// worker the same sum.
class TwoRankSum {
 public:
  absl::Status Sum(int rank, float* g, int64_t floats) {
    std::unique_lock<std::mutex> lock(mu_);
    parts_[rank].assign(g, g + floats);
    const int64_t round = round_;
    if (++arrived_ == 2) {
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
    } else if (!cv_.wait_for(lock, std::chrono::seconds(60),
                             [&] { return round_ != round; })) {
      return absl::DeadlineExceededError("the other rank never summed");
    }
    for (int64_t i = 0; i < floats; ++i) g[i] = parts_[0][i] + parts_[1][i];
    // Neither rank deposits again before both have read: the next step's
    // sum waits for the other's Step, which follows this one's read.
    if (++read_ == 2) {
      read_ = 0;
      ++reads_;
      cv_.notify_all();
    } else {
      const int64_t r = reads_;
      cv_.wait_for(lock, std::chrono::seconds(60), [&] { return reads_ != r; });
    }
    return absl::OkStatus();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<float> parts_[2];
  int arrived_ = 0, read_ = 0;
  int64_t round_ = 0, reads_ = 0;
};

std::vector<float> PullParams(GpuReplicas& gpu, const JobSpec& spec,
                              int64_t* iterations = nullptr) {
  absl::StatusOr<std::unique_ptr<Model>> m =
      Model::Build(spec.model, spec.seed + 9);
  EXPECT_TRUE(m.ok()) << m.status();
  absl::StatusOr<std::unique_ptr<Optimizer>> o =
      Optimizer::Create(spec.optimizer, (*m)->params());
  EXPECT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(gpu.PullState((*m)->params(), **o).ok());
  if (iterations != nullptr) *iterations = (*o)->iterations();
  std::vector<float> all;
  for (Param* p : (*m)->params()) {
    all.insert(all.end(), p->value.data(), p->value.data() + p->value.size());
  }
  return all;
}

// precision "fp16": an inf in one worker's gradients (injected into rank
// 1's local sum at step 1, as an overflow of the scaled loss's gradient
// would put it there) reaches both ranks through the sum, and both skip
// the step: parameters and optimizer iterations as after step 0, the loss
// scale halved from 65536 to 32768 with one skipped step counted; step 2
// applies again. The two ranks end bitwise equal. An unscaled run in
// float32 lands near the fp16 run's step 0 (SGD: a missing unscale would
// move the parameters 65536 times as far).
TEST(DeviceDataParallelTest, Fp16LossScalingSkipsAnOverflowOnEveryRankAlike) {
  SKIP_WITHOUT_CUDA_DEVICE();
  JobSpec spec = SmallDense(OptimizerType::kSgd, 0.9);
  spec.precision = Precision::kFp16;
  TwoRankSum ring;
  std::atomic<bool> inject{false};
  std::unique_ptr<GpuReplicas> ranks[2];
  for (int r = 0; r < 2; ++r) {
    absl::StatusOr<std::string> id = NewNcclUniqueId();
    ASSERT_TRUE(id.ok()) << id.status();
    GpuReplicasConfig c = OneRank(spec, *id);
    c.replica_indices = {r};
    c.world_replicas = 2;
    c.host_all_reduce = [&ring, &inject, r](int64_t, float* g, int64_t floats) {
      if (r == 1 && inject.load()) g[floats / 3] = INFINITY;
      return ring.Sum(r, g, floats);
    };
    absl::StatusOr<std::unique_ptr<GpuReplicas>> d = MakeGpuReplicas(c);
    ASSERT_TRUE(d.ok()) << d.status();
    ranks[r] = *std::move(d);
    EXPECT_EQ(ranks[r]->loss_scale().scale, 65536.0);
  }
  auto step_both = [&](int step) {
    absl::Status st[2];
    std::thread other([&] {
      Batch b = MakeTestBatch(step);
      st[1] = ranks[1]->Step(b, nullptr, *spec.loss, 1, 0.05).status();
    });
    Batch a = MakeTestBatch(step);
    st[0] = ranks[0]->Step(a, nullptr, *spec.loss, 1, 0.05).status();
    other.join();
    EXPECT_TRUE(st[0].ok()) << st[0];
    EXPECT_TRUE(st[1].ok()) << st[1];
  };
  step_both(0);
  int64_t iterations = -1;
  const std::vector<float> after0 = PullParams(*ranks[0], spec, &iterations);
  EXPECT_EQ(iterations, 1);

  inject.store(true);
  step_both(1);
  inject.store(false);
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE(r);
    EXPECT_EQ(PullParams(*ranks[r], spec, &iterations), after0);
    EXPECT_EQ(iterations, 1);
    const LossScaleState ls = ranks[r]->loss_scale();
    EXPECT_EQ(ls.scale, 32768.0);
    EXPECT_EQ(ls.skipped_steps, 1);
    EXPECT_EQ(ls.good_steps, 0);
  }

  step_both(2);
  const std::vector<float> end0 = PullParams(*ranks[0], spec, &iterations);
  EXPECT_EQ(iterations, 2);
  EXPECT_NE(end0, after0);
  EXPECT_EQ(PullParams(*ranks[1], spec), end0);
  EXPECT_EQ(ranks[1]->loss_scale().good_steps, 1);

  // Step 0 unscaled, in float32, on one rank: the two workers summed the
  // same batch's gradient g twice (2g at lr 0.05), so g at lr 0.1.
  JobSpec fp32 = spec;
  fp32.precision = Precision::kFp32;
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  GpuReplicasConfig c = OneRank(fp32, *id);
  absl::StatusOr<std::unique_ptr<GpuReplicas>> plain = MakeGpuReplicas(c);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ((*plain)->loss_scale().scale, 0.0);
  Batch b = MakeTestBatch(0);
  ASSERT_TRUE((*plain)->Step(b, nullptr, *spec.loss, 1, 0.1).ok());
  const std::vector<float> want = PullParams(**plain, fp32);
  ASSERT_EQ(want.size(), after0.size());
  double moved = 0, off = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    off = std::max(off, std::fabs(double{after0[i]} - want[i]));
  }
  absl::StatusOr<std::unique_ptr<Model>> init =
      Model::Build(spec.model, spec.seed);
  ASSERT_TRUE(init.ok());
  size_t k = 0;
  for (Param* p : (*init)->params()) {
    for (int64_t j = 0; j < p->value.size(); ++j, ++k) {
      moved = std::max(moved, std::fabs(double{want[k]} - p->value.data()[j]));
    }
  }
  EXPECT_GT(moved, 1e-4);
  EXPECT_LT(off, 0.05 * moved) << "moved " << moved;
}

// precision "bf16" on the GPU (cuBLAS on bfloat16 copies) against the CPU
// replicas' bf16 (kernels/cpu/gemm.h): the same op policy, so after three
// SGD steps the parameters agree far nearer (float32 summation noise,
// and the odd activation rounded to the other side) than either is to
// the float32 run.
TEST(DeviceDataParallelTest, Bf16StepsLikeTheCpusBf16) {
  SKIP_WITHOUT_CUDA_DEVICE();
  JobSpec spec = SmallDense(OptimizerType::kSgd, 0.9);
  spec.precision = Precision::kBf16;
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  absl::StatusOr<std::unique_ptr<GpuReplicas>> gpu =
      MakeGpuReplicas(OneRank(spec, *id));
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ((*gpu)->loss_scale().scale, 0.0);  // bf16 needs no scaling
  auto cpu_run = [&](Precision precision) {
    JobSpec s = spec;
    s.precision = precision;
    absl::StatusOr<std::unique_ptr<ReplicaSet>> cpu =
        ReplicaSet::Create(s, {0}, 1);
    EXPECT_TRUE(cpu.ok()) << cpu.status();
    absl::StatusOr<std::unique_ptr<Optimizer>> opt =
        Optimizer::Create(s.optimizer, (*cpu)->params());
    EXPECT_TRUE(opt.ok()) << opt.status();
    for (int step = 0; step < 3; ++step) {
      Batch b = MakeTestBatch(step);
      EXPECT_TRUE((*cpu)->ComputeGradients(b, *s.loss, 1).ok());
      (*opt)->Apply(0.05);
    }
    std::vector<float> all;
    for (Param* p : (*cpu)->params()) {
      all.insert(all.end(), p->value.data(), p->value.data() + p->value.size());
    }
    return all;
  };
  for (int step = 0; step < 3; ++step) {
    Batch b = MakeTestBatch(step);
    ASSERT_TRUE((*gpu)->Step(b, nullptr, *spec.loss, 1, 0.05).ok());
  }
  const std::vector<float> got = PullParams(**gpu, spec);
  const std::vector<float> bf16 = cpu_run(Precision::kBf16);
  const std::vector<float> fp32 = cpu_run(Precision::kFp32);
  ASSERT_EQ(got.size(), bf16.size());
  double to_bf16 = 0, to_fp32 = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    to_bf16 = std::max(to_bf16, std::fabs(double{got[i]} - bf16[i]));
    to_fp32 = std::max(to_fp32, std::fabs(double{got[i]} - fp32[i]));
  }
  EXPECT_GT(to_fp32, 1e-6);  // bf16 rounding changed the run
  EXPECT_LT(to_bf16, 0.1 * to_fp32) << "float32 is " << to_fp32 << " away";
}

}  // namespace
}  // namespace cuda
}  // namespace lockstep
