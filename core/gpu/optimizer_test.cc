// The GPU updates against core/train/optimizer.cc's Optimizer, bit for bit, over
// several steps (so slots and Adam's bias correction are exercised).
#include "kernels/cuda/optimizer.h"

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
              kN,
              MakeSgdStep(lr, spec.momentum, spec.nesterov, spec.weight_decay),
              w.get(), spec.momentum > 0 ? m.get() : nullptr, g.get(), nullptr),
          cudaSuccess);
    } else {
      ASSERT_EQ(
          AdamUpdate(kN,
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

TEST(OptimizerStepTest, AdamScalarsNeedNoDevice) {
  const AdamStep s = MakeAdamStep(0.001, 0.9, 0.999, 1e-7, 0, 0);
  EXPECT_FLOAT_EQ(s.alpha, static_cast<float>(0.001 * std::sqrt(0.001) / 0.1));
  EXPECT_FLOAT_EQ(s.one_minus_b1, 0.1f);
  EXPECT_FALSE(s.decay);
  const SgdStep g = MakeSgdStep(0.1, 0.9, true, 0.01);
  EXPECT_TRUE(g.decay);
  EXPECT_EQ(g.decay_factor, static_cast<float>(0.01 * 0.1));
}

}  // namespace
}  // namespace cuda
}  // namespace lockstep
