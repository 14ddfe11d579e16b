// The GPU's optimizer (optimizer_cuda.h and kernels/cuda/optimizer.h's
// kernels) against core/train/optimizer.cc's Optimizer, bit for bit, over
// several steps (so slots and Adam's bias correction are exercised).
#include "core/train/optimizer_cuda.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/job/job_spec.h"
#include "core/tensor.h"
#include "core/train/optimizer.h"
#include "gtest/gtest.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cuda/cuda_test_util.h"
#include "kernels/cuda/optimizer.h"

namespace lockstep {
namespace cuda {
namespace {

struct Case {
  std::string name;
  OptimizerSpec spec;
};

Case Sgd(std::string name, double momentum, bool nesterov, double decay) {
  OptimizerSpec s;
  s.type = OptimizerType::kSgd;
  s.learning_rate = 0.05;
  s.momentum = momentum;
  s.nesterov = nesterov;
  s.weight_decay = decay;
  return {std::move(name), s};
}

Case Adam(std::string name, OptimizerType type, double decay) {
  OptimizerSpec s;
  s.type = type;
  s.learning_rate = 0.003;
  s.weight_decay = decay;
  return {std::move(name), s};
}

class OptimizerTest : public ::testing::TestWithParam<Case> {};

TEST_P(OptimizerTest, StepsMatchCpuOptimizerBitForBit) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const OptimizerSpec& spec = GetParam().spec;
  constexpr int64_t kN = 10007;
  Param p{"w", Tensor({kN}, RandomVector(kN, 31)), Tensor({kN})};
  absl::StatusOr<std::unique_ptr<Optimizer>> cpu =
      Optimizer::Create(spec, {&p});
  ASSERT_TRUE(cpu.ok()) << cpu.status();

  std::vector<float> w0(p.value.data(), p.value.data() + kN);
  DeviceArray<float> w(w0), m(kN), v(kN), g(kN);
  const DeviceArray<FlatRun> runs(
      std::vector<FlatRun>{{0, kN, 1, DecaysWeights(spec, p.name) ? 1 : 0}});
  const bool sgd = spec.type == OptimizerType::kSgd;
  for (int step = 0; step < 4; ++step) {
    const std::vector<float> grad = RandomVector(kN, 40 + step, -0.5f, 0.5f);
    std::memcpy(p.grad.data(), grad.data(), kN * sizeof(float));
    ASSERT_EQ(cudaMemcpy(g.get(), grad.data(), kN * sizeof(float),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
    const double lr = spec.learning_rate * (1.0 - 0.1 * step);
    if (sgd) {
      ASSERT_EQ(
          SgdUpdate(
              kN, runs.get(), 1,
              MakeSgdStep(lr, spec.momentum, spec.nesterov, spec.weight_decay),
              w.get(), spec.momentum > 0 ? m.get() : nullptr, g.get(), nullptr),
          cudaSuccess);
    } else {
      ASSERT_EQ(
          AdamUpdate(kN, runs.get(), 1,
                     MakeAdamStep(lr, spec.beta_1, spec.beta_2, spec.epsilon,
                                  spec.weight_decay, (*cpu)->iterations()),
                     w.get(), m.get(), v.get(), g.get(), nullptr),
          cudaSuccess);
    }
    (*cpu)->Apply(lr);
  }
  ExpectSameBits(std::vector<float>(p.value.data(), p.value.data() + kN),
                 w.ToHost(), "w");
  for (const auto& [name, tensor] : (*cpu)->StateTensors()) {
    const bool second = name.find("/v/") != std::string::npos;
    ExpectSameBits(std::vector<float>(tensor->data(), tensor->data() + kN),
                   second ? v.ToHost() : m.ToHost(), name);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, OptimizerTest,
    ::testing::Values(Sgd("sgd", 0, false, 0), Sgd("momentum", 0.9, false, 0),
                      Sgd("nesterov", 0.9, true, 0),
                      Sgd("sgd_decay", 0.9, false, 0.01),
                      Adam("adam", OptimizerType::kAdam, 0),
                      Adam("adamw", OptimizerType::kAdamW, 0.004)),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// Clipping by the global norm over two params in one flat buffer (the
// norm summed on the device in two passes), with the bias excluded from
// weight decay and a run between them that the optimizer does not update
// (as batch norm's statistics): the CPU optimizer's steps, bit for bit,
// its norm to the last bits of a double, and the run between untouched
// and left out of the norm, from one launch of each kernel.
TEST(OptimizerClipTest, ClippedStepsWithExcludedDecayMatchTheCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (OptimizerType type : {OptimizerType::kSgd, OptimizerType::kAdamW}) {
    SCOPED_TRACE(type == OptimizerType::kSgd ? "sgd" : "adamw");
    OptimizerSpec spec;
    spec.type = type;
    spec.learning_rate = 0.01;
    spec.momentum = 0.9;
    spec.weight_decay = 0.5;
    spec.exclude_from_weight_decay = {"bias"};
    spec.global_clipnorm = 1.0;
    const std::vector<int64_t> sizes = {100003, 513};
    constexpr int64_t kSkipped = 777;
    Param kernel{"dense/kernel", Tensor({sizes[0]}, RandomVector(sizes[0], 7)),
                 Tensor({sizes[0]})};
    Param bias{"dense/bias", Tensor({sizes[1]}, RandomVector(sizes[1], 8)),
               Tensor({sizes[1]})};
    std::vector<Param*> params = {&kernel, &bias};
    absl::StatusOr<std::unique_ptr<Optimizer>> cpu =
        Optimizer::Create(spec, params);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    EXPECT_TRUE((*cpu)->Decays(kernel.name));
    EXPECT_FALSE((*cpu)->Decays(bias.name));
    // [kernel][skipped][bias]: the skipped run's values and gradients are
    // large, so an update of them or their place in the norm shows.
    const int64_t at[2] = {0, sizes[0] + kSkipped};
    const int64_t n = at[1] + sizes[1];
    const std::vector<FlatRun> table = {
        {0, sizes[0], 1, 1}, {sizes[0], at[1], 0, 0}, {at[1], n, 1, 0}};
    const DeviceArray<FlatRun> runs(table);
    std::vector<float> flat(n, 1000.0f);
    for (size_t k = 0; k < 2; ++k) {
      std::memcpy(flat.data() + at[k], params[k]->value.data(),
                  sizes[k] * sizeof(float));
    }
    DeviceArray<float> w(flat), m(n), v(n), g(n);
    DeviceArray<double> norm(kNormBlocks + 1);
    for (int step = 0; step < 4; ++step) {
      std::vector<float> grads(n, 1000.0f);
      for (size_t k = 0; k < 2; ++k) {
        const std::vector<float> grad =
            RandomVector(sizes[k], 50 + 2 * step + k, -0.5f, 0.5f);
        std::memcpy(params[k]->grad.data(), grad.data(),
                    sizes[k] * sizeof(float));
        std::memcpy(grads.data() + at[k], grad.data(),
                    sizes[k] * sizeof(float));
      }
      ASSERT_EQ(cudaMemcpy(g.get(), grads.data(), n * sizeof(float),
                           cudaMemcpyHostToDevice),
                cudaSuccess);
      ASSERT_EQ(
          SumSquaresPartials(n, runs.get(), 3, g.get(), norm.get(), nullptr),
          cudaSuccess);
      ASSERT_EQ(SumPartials(kNormBlocks, norm.get(), norm.get() + kNormBlocks,
                            nullptr),
                cudaSuccess);
      const GradientClip clip{spec.global_clipnorm, norm.get() + kNormBlocks};
      if (type == OptimizerType::kSgd) {
        SgdStep s = MakeSgdStep(spec.learning_rate, spec.momentum, false,
                                spec.weight_decay);
        s.clip = clip;
        ASSERT_EQ(
            SgdUpdate(n, runs.get(), 3, s, w.get(), m.get(), g.get(), nullptr),
            cudaSuccess);
      } else {
        AdamStep s =
            MakeAdamStep(spec.learning_rate, spec.beta_1, spec.beta_2,
                         spec.epsilon, spec.weight_decay, (*cpu)->iterations());
        s.clip = clip;
        ASSERT_EQ(AdamUpdate(n, runs.get(), 3, s, w.get(), m.get(), v.get(),
                             g.get(), nullptr),
                  cudaSuccess);
      }
      (*cpu)->Apply(spec.learning_rate);
      const double gpu_norm = std::sqrt(norm.ToHost()[kNormBlocks]);
      // Clipped: the norm of 100k uniform(-0.5, 0.5) values is about 91
      // (with the skipped run's gradients it would be over 27,000).
      EXPECT_GT((*cpu)->last_grad_norm(), 50.0);
      EXPECT_NEAR(gpu_norm, (*cpu)->last_grad_norm(),
                  1e-12 * (*cpu)->last_grad_norm())
          << "step " << step;
    }
    const std::vector<float> out = w.ToHost();
    for (size_t k = 0; k < 2; ++k) {
      ExpectSameBits(std::vector<float>(params[k]->value.data(),
                                        params[k]->value.data() + sizes[k]),
                     std::vector<float>(out.begin() + at[k],
                                        out.begin() + at[k] + sizes[k]),
                     params[k]->name);
    }
    EXPECT_EQ(std::vector<float>(out.begin() + sizes[0], out.begin() + at[1]),
              std::vector<float>(kSkipped, 1000.0f));
  }
}

// fp16's loss scaling in the update: gradients 2^12 times the true ones
// with unscale 2^-12 make the unscaled update bit for bit (SGD with
// momentum and Adam, clipping on: the norm is unscaled too); an inf in one
// gradient skips the whole step, parameters and slots untouched, NaN
// likewise; without skip_nonfinite an inf would have been applied.
TEST(OptimizerLossScaleTest, UnscalesExactlyAndSkipsAnOverflowedStep) {
  SKIP_WITHOUT_CUDA_DEVICE();
  constexpr int64_t kN = 4099;
  constexpr float kScale = 4096.0f;
  for (OptimizerType type : {OptimizerType::kSgd, OptimizerType::kAdam}) {
    SCOPED_TRACE(type == OptimizerType::kSgd ? "sgd" : "adam");
    const std::vector<FlatRun> table = {{0, kN, 1, 0}};
    const DeviceArray<FlatRun> runs(table);
    const std::vector<float> w0 = RandomVector(kN, 3);
    const std::vector<float> g0 = RandomVector(kN, 4, -0.5f, 0.5f);
    std::vector<float> scaled(g0);
    for (float& x : scaled) x *= kScale;
    // Two updates from the same state: true gradients, and scaled ones.
    auto update = [&](const std::vector<float>& grads, float unscale,
                      std::vector<float>* w_out, std::vector<float>* m_out) {
      DeviceArray<float> w(w0), m(kN), v(kN), g(grads);
      DeviceArray<double> norm(kNormBlocks + 1);
      ASSERT_EQ(
          SumSquaresPartials(kN, runs.get(), 1, g.get(), norm.get(), nullptr),
          cudaSuccess);
      ASSERT_EQ(SumPartials(kNormBlocks, norm.get(), norm.get() + kNormBlocks,
                            nullptr),
                cudaSuccess);
      // A clipnorm under the true norm (about 18.5): clipping applies.
      const GradientClip clip{5.0, norm.get() + kNormBlocks, unscale, true};
      if (type == OptimizerType::kSgd) {
        SgdStep s = MakeSgdStep(0.05, 0.9, false, 0);
        s.clip = clip;
        ASSERT_EQ(
            SgdUpdate(kN, runs.get(), 1, s, w.get(), m.get(), g.get(), nullptr),
            cudaSuccess);
      } else {
        AdamStep s = MakeAdamStep(0.003, 0.9, 0.999, 1e-7, 0, 0);
        s.clip = clip;
        ASSERT_EQ(AdamUpdate(kN, runs.get(), 1, s, w.get(), m.get(), v.get(),
                             g.get(), nullptr),
                  cudaSuccess);
      }
      *w_out = w.ToHost();
      *m_out = m.ToHost();
    };
    std::vector<float> w_true, m_true, w_scaled, m_scaled;
    update(g0, 1.0f, &w_true, &m_true);
    update(scaled, 1.0f / kScale, &w_scaled, &m_scaled);
    EXPECT_NE(w_true, w0);  // the step moved them
    ExpectSameBits(w_true, w_scaled, "parameters");
    ExpectSameBits(m_true, m_scaled, "first slot");
    for (float bad : {INFINITY, NAN}) {
      std::vector<float> overflowed(scaled);
      overflowed[kN / 2] = bad;
      std::vector<float> w_skip, m_skip;
      update(overflowed, 1.0f / kScale, &w_skip, &m_skip);
      ExpectSameBits(w0, w_skip, "skipped step's parameters");
      EXPECT_EQ(m_skip, std::vector<float>(kN, 0.0f));
    }
    // A scale below 1 (unscale 2^24, the floor's): a finite gradient of
    // 1e32 overflows float once unscaled, so the step is skipped too.
    std::vector<float> huge(g0);
    huge[7] = 1e32f;
    std::vector<float> w_skip, m_skip;
    update(huge, 16777216.0f, &w_skip, &m_skip);
    ExpectSameBits(w0, w_skip, "unscaled overflow's parameters");
    EXPECT_EQ(m_skip, std::vector<float>(kN, 0.0f));
  }
}

// The overflow rule itself (host side: what GradientsFinite decides).
TEST(OptimizerLossScaleTest, OverflowIsTestedAfterUnscaling) {
  EXPECT_FALSE(GradientsOverflowed(4.0, 1.0f));
  EXPECT_TRUE(GradientsOverflowed(INFINITY, 1.0f));
  EXPECT_TRUE(GradientsOverflowed(NAN, 1.0f / 65536));
  // A norm of 1e32, unscaled by 2^24: 1.7e39, past float's 3.4e38.
  EXPECT_TRUE(GradientsOverflowed(1e64, 16777216.0f));
  EXPECT_FALSE(GradientsOverflowed(1e64, 1.0f / 65536));
  EXPECT_FALSE(GradientsOverflowed(1e64, 1.0f));
}

// DeviceOptimizer over a padded flat layout (kernel, a frozen param, the
// bias; each at a multiple of 64 floats): three AdamW steps with the bias
// out of weight decay and clipping on are the CPU Optimizer's bit for bit,
// the frozen param and the padding's neighbours untouched; its slots
// pulled into an optimizer's state tensors are the CPU's, and pushed into
// a fresh DeviceOptimizer come back the same.
TEST(DeviceOptimizerTest, StepsAndStateAreTheCpuOptimizers) {
  SKIP_WITHOUT_CUDA_DEVICE();
  OptimizerSpec spec;
  spec.type = OptimizerType::kAdamW;
  spec.learning_rate = 0.01;
  spec.weight_decay = 0.1;
  spec.exclude_from_weight_decay = {"bias"};
  spec.global_clipnorm = 1.0;
  Param kernel{"dense/kernel", Tensor({300}, RandomVector(300, 1)),
               Tensor({300})};
  Param frozen{"frozen/kernel", Tensor({7}, RandomVector(7, 2)), Tensor({7})};
  frozen.update = ParamUpdate::kFrozen;
  Param bias{"dense/bias", Tensor({13}, RandomVector(13, 3)), Tensor({13})};
  std::vector<Param*> params = {&kernel, &frozen, &bias};
  const FlatLayout layout{{0, 320, 384}, {300, 7, 13}, 448};
  absl::StatusOr<std::unique_ptr<Optimizer>> cpu =
      Optimizer::Create(spec, params);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  absl::StatusOr<std::unique_ptr<DeviceOptimizer>> gpu =
      DeviceOptimizer::Create(0, spec, params, layout, true);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  std::vector<float> w(448, 5.0f);
  for (size_t p = 0; p < params.size(); ++p) {
    std::copy(params[p]->value.data(),
              params[p]->value.data() + params[p]->value.size(),
              w.begin() + layout.offsets[p]);
  }
  DeviceArray<float> dw(w);
  for (int step = 0; step < 3; ++step) {
    std::vector<float> g(448, 0.0f);
    for (size_t p = 0; p < params.size(); ++p) {
      const std::vector<float> grad =
          RandomVector(params[p]->grad.size(), 10 + 3 * step + p);
      std::copy(grad.begin(), grad.end(), params[p]->grad.data());
      std::copy(grad.begin(), grad.end(), g.begin() + layout.offsets[p]);
    }
    DeviceArray<float> dg(g);
    ASSERT_TRUE((*gpu)
                    ->Update(0.01, (*cpu)->iterations(), 1.0f, false, 0,
                             dw.get(), dg.get(), nullptr)
                    .ok());
    (*cpu)->Apply(0.01);
    absl::StatusOr<bool> finite = (*gpu)->GradientsFinite();
    ASSERT_TRUE(finite.ok() && *finite);
  }
  const std::vector<float> got = dw.ToHost();
  for (size_t p = 0; p < params.size(); ++p) {
    ExpectSameBits(
        std::vector<float>(params[p]->value.data(),
                           params[p]->value.data() + params[p]->value.size()),
        std::vector<float>(
            got.begin() + layout.offsets[p],
            got.begin() + layout.offsets[p] + params[p]->value.size()),
        params[p]->name);
  }
  EXPECT_EQ(std::vector<float>(got.begin() + 320, got.begin() + 327),
            std::vector<float>(frozen.value.data(), frozen.value.data() + 7));

  absl::StatusOr<std::unique_ptr<Optimizer>> pulled =
      Optimizer::Create(spec, params);
  ASSERT_TRUE(pulled.ok());
  absl::StatusOr<std::vector<Tensor*>> states = (*gpu)->Match(**pulled);
  ASSERT_TRUE(states.ok()) << states.status();
  ASSERT_TRUE((*gpu)->Pull(*states, nullptr).ok());
  std::vector<std::pair<std::string, Tensor*>> want = (*cpu)->StateTensors();
  ASSERT_EQ(states->size(), want.size());
  ASSERT_EQ(want.size(), 4u);  // m and v of the kernel and the bias
  for (size_t k = 0; k < want.size(); ++k) {
    ExpectSameBits(
        std::vector<float>(want[k].second->data(),
                           want[k].second->data() + want[k].second->size()),
        std::vector<float>((*states)[k]->data(),
                           (*states)[k]->data() + (*states)[k]->size()),
        want[k].first);
  }
  absl::StatusOr<std::unique_ptr<DeviceOptimizer>> fresh =
      DeviceOptimizer::Create(0, spec, params, layout, false);
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE((*fresh)->Push(*states, nullptr).ok());
  absl::StatusOr<std::unique_ptr<Optimizer>> again =
      Optimizer::Create(spec, params);
  absl::StatusOr<std::vector<Tensor*>> back = (*fresh)->Match(**again);
  ASSERT_TRUE(back.ok());
  ASSERT_TRUE((*fresh)->Pull(*back, nullptr).ok());
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(std::vector<float>((*back)[k]->data(),
                                 (*back)[k]->data() + (*back)[k]->size()),
              std::vector<float>((*states)[k]->data(),
                                 (*states)[k]->data() + (*states)[k]->size()))
        << want[k].first;
  }
  // A state of another optimizer is refused, naming both.
  OptimizerSpec sgd;
  sgd.type = OptimizerType::kSgd;
  sgd.learning_rate = 0.1;
  sgd.momentum = 0.9;
  absl::StatusOr<std::unique_ptr<Optimizer>> other =
      Optimizer::Create(sgd, params);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*gpu)->Match(**other).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Without the norm's buffers (no global_clipnorm, not fp16) the update
// still unscales: gradients x 4096 with unscale 1/4096 step as the true
// ones on the CPU; skipping overflowed steps is refused (no sum to test).
TEST(DeviceOptimizerTest, UnscalesWithoutTheNormsBuffers) {
  SKIP_WITHOUT_CUDA_DEVICE();
  constexpr float kScale = 4096.0f;
  OptimizerSpec spec;
  spec.type = OptimizerType::kSgd;
  spec.learning_rate = 0.05;
  spec.momentum = 0.9;
  Param kernel{"dense/kernel", Tensor({300}, RandomVector(300, 1)),
               Tensor({300})};
  std::vector<Param*> params = {&kernel};
  const FlatLayout layout{{0}, {300}, 320};
  absl::StatusOr<std::unique_ptr<Optimizer>> cpu =
      Optimizer::Create(spec, params);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  absl::StatusOr<std::unique_ptr<DeviceOptimizer>> gpu =
      DeviceOptimizer::Create(0, spec, params, layout, false);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  std::vector<float> w(320, 0.0f);
  std::copy(kernel.value.data(), kernel.value.data() + 300, w.begin());
  DeviceArray<float> dw(w);
  for (int step = 0; step < 2; ++step) {
    const std::vector<float> grad = RandomVector(300, 20 + step, -0.5f, 0.5f);
    std::copy(grad.begin(), grad.end(), kernel.grad.data());
    std::vector<float> scaled(320, 0.0f);
    for (int i = 0; i < 300; ++i) scaled[i] = grad[i] * kScale;
    DeviceArray<float> dg(scaled);
    ASSERT_TRUE((*gpu)
                    ->Update(0.05, (*cpu)->iterations(), 1.0f / kScale, false,
                             0, dw.get(), dg.get(), nullptr)
                    .ok());
    (*cpu)->Apply(0.05);
  }
  const std::vector<float> got = dw.ToHost();
  ExpectSameBits(
      std::vector<float>(kernel.value.data(), kernel.value.data() + 300),
      std::vector<float>(got.begin(), got.begin() + 300), "dense/kernel");
  DeviceArray<float> dg(std::vector<float>(320, 1.0f));
  const absl::Status skip =
      (*gpu)->Update(0.05, (*cpu)->iterations(), 1.0f / kScale, true, 0,
                     dw.get(), dg.get(), nullptr);
  EXPECT_EQ(skip.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(skip.message().find("needs the global norm's buffers"),
            std::string::npos)
      << skip;
}

TEST(OptimizerStepTest, AdamScalarsNeedNoDevice) {
  const AdamStep s = MakeAdamStep(0.001, 0.9, 0.999, 1e-7, 0, 0);
  EXPECT_FLOAT_EQ(s.alpha, static_cast<float>(0.001 * std::sqrt(0.001) / 0.1));
  EXPECT_FLOAT_EQ(s.one_minus_b1, 0.1f);
  EXPECT_EQ(s.decay_factor, 0.0f);
  const SgdStep g = MakeSgdStep(0.1, 0.9, true, 0.01);
  EXPECT_EQ(g.decay_factor, static_cast<float>(0.01 * 0.1));
}

}  // namespace
}  // namespace cuda
}  // namespace lockstep
