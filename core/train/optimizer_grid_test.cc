// The GPU's update kernels, run on the CPU: kernels/cuda/optimizer_grid.h's
// per-thread functions (each kernel in optimizer.cu and batch_norm.cu is
// one call of them) over every thread of an emulated grid, against
// core/train/optimizer.cc's Optimizer and UpdateMovingAverages, bit for
// bit. No device needed: what the CUDA tests (optimizer_cuda_test) check on
// a GPU, less the compiler and the launch.
#include "kernels/cuda/optimizer_grid.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/job/job_spec.h"
#include "core/tensor.h"
#include "core/train/optimizer.h"
#include "gtest/gtest.h"
#include "kernels/cpu/test_util.h"

namespace lockstep {
namespace cuda {
namespace {

// A grid of `threads` threads in all (blocks * threads per block), each
// stepping by the whole grid, as grid_stride.cuh's kernels do.
struct Grid {
  int64_t threads;
};

// The first index at which a and b differ in their bits, or -1.
int64_t FirstDifference(const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(a + i, b + i, sizeof(float)) != 0) return i;
  }
  return -1;
}

void ExpectSameBits(const float* want, const float* got, int64_t n,
                    const std::string& what) {
  const int64_t i = FirstDifference(want, got, n);
  EXPECT_EQ(i, -1) << what << ": element " << i << " is " << got[i]
                   << ", the CPU's is " << want[i];
}

// Runs that tile [0, n): random lengths (some empty), updated or not,
// decayed or not.
std::vector<FlatRun> RandomRuns(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<FlatRun> runs;
  int64_t at = 0;
  while (at < n) {
    const int64_t len =
        std::min<int64_t>(n - at, std::uniform_int_distribution<int64_t>(
                                      0, std::max<int64_t>(1, n / 5))(gen));
    runs.push_back(FlatRun{at, at + len, static_cast<int32_t>(gen() % 3 != 0),
                           static_cast<int32_t>(gen() % 2)});
    at += len;
  }
  if (runs.empty()) runs.push_back(FlatRun{0, 0, 1, 0});
  return runs;
}

// The threads' walks (ForUpdated) visit every element of an updated run
// once and no other element, whatever the grid: one thread, a grid smaller
// than the buffer (each thread visits several runs) and a grid larger than
// it; runs empty, one element long, or longer than the grid.
TEST(OptimizerGridTest, EveryUpdatedElementIsVisitedOnceAndNoOther) {
  for (int64_t n : {0, 1, 2, 255, 256, 1000, 4099}) {
    for (uint32_t seed = 1; seed <= 12; ++seed) {
      const std::vector<FlatRun> runs = RandomRuns(n, seed);
      std::vector<int> want(n, 0);
      for (const FlatRun& r : runs) {
        for (int64_t i = r.begin; i < r.end; ++i) want[i] = r.update;
      }
      for (int64_t stride : {1, 3, 7, 64, 256, 1280, 8192}) {
        std::vector<int> visits(n, 0);
        for (int64_t t = 0; t < stride; ++t) {
          ForUpdated(t, stride, n, runs.data(), static_cast<int>(runs.size()),
                     [&](int64_t i, const FlatRun& run) {
                       ASSERT_GE(i, run.begin);
                       ASSERT_LT(i, run.end);
                       ASSERT_EQ(i % stride, t) << "not this thread's element";
                       ++visits[i];
                     });
        }
        ASSERT_EQ(visits, want) << "n " << n << ", seed " << seed
                                << ", grid of " << stride << " threads";
      }
    }
  }
}

// Every thread of `grid`, in order (each element belongs to one thread, so
// the order does not change the result).
template <typename F>
void EachThread(Grid grid, F f) {
  for (int64_t t = 0; t < grid.threads; ++t) f(t, grid.threads);
}

// The sum of squares as SumSquaresPartials and SumPartials compute it,
// thread by thread (on a device the block's tree adds the same parts in
// another order: the last bits of a double).
double SumSquares(Grid grid, int64_t n, const std::vector<FlatRun>& runs,
                  const float* g) {
  double sum = 0;
  EachThread(grid, [&](int64_t first, int64_t stride) {
    sum += SumSquaresThread(first, stride, n, runs.data(),
                            static_cast<int>(runs.size()), g);
  });
  return sum;
}

struct Case {
  std::string name;
  OptimizerType type;
  double momentum;
  bool nesterov;
  double weight_decay;
  double clipnorm;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class OptimizerGridMatchTest : public ::testing::TestWithParam<Case> {};

// Two params in one flat buffer with a run between them that the optimizer
// leaves (batch norm's statistics), the bias excluded from weight decay:
// four steps of the emulated kernels against the CPU optimizer, over a grid
// smaller than the buffer and one larger, bit for bit; the run between
// untouched. With clipping, the norm is clipped at every step.
TEST_P(OptimizerGridMatchTest, StepsMatchTheCpuOptimizerBitForBit) {
  const Case& c = GetParam();
  OptimizerSpec spec;
  spec.type = c.type;
  spec.learning_rate = c.type == OptimizerType::kSgd ? 0.05 : 0.003;
  spec.momentum = c.momentum;
  spec.nesterov = c.nesterov;
  spec.weight_decay = c.weight_decay;
  spec.exclude_from_weight_decay = {"bias"};
  spec.global_clipnorm = c.clipnorm;
  const int64_t sizes[2] = {3001, 77};
  constexpr int64_t kBetween = 129;
  for (Grid grid : {Grid{5 * 64}, Grid{8192}}) {
    SCOPED_TRACE("grid of " + std::to_string(grid.threads) + " threads");
    Param kernel{"dense/kernel", Tensor({sizes[0]}, RandomVector(sizes[0], 7)),
                 Tensor({sizes[0]})};
    Param bias{"dense/bias", Tensor({sizes[1]}, RandomVector(sizes[1], 8)),
               Tensor({sizes[1]})};
    const std::vector<Param*> params = {&kernel, &bias};
    absl::StatusOr<std::unique_ptr<Optimizer>> cpu =
        Optimizer::Create(spec, params);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    const int64_t at[2] = {0, sizes[0] + kBetween};
    const int64_t n = at[1] + sizes[1];
    const std::vector<FlatRun> runs = {
        {0, sizes[0], 1, DecaysWeights(spec, kernel.name) ? 1 : 0},
        {sizes[0], at[1], 0, 0},
        {at[1], n, 1, DecaysWeights(spec, bias.name) ? 1 : 0}};
    const int count = static_cast<int>(runs.size());
    // The run between: large values and gradients, so an update of them or
    // their place in the norm shows.
    std::vector<float> w(n, 1000.0f), m(n, 0.0f), v(n, 0.0f);
    for (int k = 0; k < 2; ++k) {
      std::memcpy(w.data() + at[k], params[k]->value.data(),
                  sizes[k] * sizeof(float));
    }
    const bool sgd = c.type == OptimizerType::kSgd;
    for (int step = 0; step < 4; ++step) {
      std::vector<float> g(n, 1000.0f);
      for (int k = 0; k < 2; ++k) {
        const std::vector<float> grad =
            RandomVector(sizes[k], 50 + 2 * step + k, -0.5f, 0.5f);
        std::memcpy(params[k]->grad.data(), grad.data(),
                    sizes[k] * sizeof(float));
        std::memcpy(g.data() + at[k], grad.data(), sizes[k] * sizeof(float));
      }
      const double lr = spec.learning_rate * (1.0 - 0.1 * step);
      const double sum_squares = SumSquares(grid, n, runs, g.data());
      const GradientClip clip{spec.global_clipnorm, &sum_squares};
      SgdStep s =
          MakeSgdStep(lr, spec.momentum, spec.nesterov, spec.weight_decay);
      AdamStep a = MakeAdamStep(lr, spec.beta_1, spec.beta_2, spec.epsilon,
                                spec.weight_decay, (*cpu)->iterations());
      s.clip = a.clip = clip;
      EachThread(grid, [&](int64_t first, int64_t stride) {
        if (sgd) {
          SgdThread(first, stride, n, runs.data(), count, s, w.data(),
                    spec.momentum > 0 ? m.data() : nullptr, g.data());
        } else {
          AdamThread(first, stride, n, runs.data(), count, a, w.data(),
                     m.data(), v.data(), g.data());
        }
      });
      ASSERT_TRUE((*cpu)->Apply(lr, nullptr).ok());
      if (c.clipnorm > 0) {
        // The norm of 3,000 uniform(-0.5, 0.5) values is about 16: clipped
        // to 1 (with the run between it would be over 11,000).
        EXPECT_GT((*cpu)->last_grad_norm(), 10.0);
        EXPECT_NEAR(std::sqrt(sum_squares), (*cpu)->last_grad_norm(),
                    1e-12 * (*cpu)->last_grad_norm())
            << "step " << step;
      }
    }
    for (int k = 0; k < 2; ++k) {
      ExpectSameBits(params[k]->value.data(), w.data() + at[k], sizes[k],
                     params[k]->name);
    }
    for (int64_t i = sizes[0]; i < at[1]; ++i) {
      ASSERT_EQ(w[i], 1000.0f) << "the run between was updated at " << i;
      ASSERT_EQ(m[i], 0.0f) << "the run between has a slot at " << i;
      ASSERT_EQ(v[i], 0.0f) << "the run between has a slot at " << i;
    }
    // The slots of the params moved (so the checks above can fail).
    if (!sgd || c.momentum > 0) {
      EXPECT_NE(m[0], 0.0f);
      EXPECT_NE(m[at[1]], 0.0f);
    }
    if (!sgd) {
      EXPECT_NE(v[at[1]], 0.0f);
    }
    const std::vector<StatePiece> pieces = (*cpu)->StatePieces();
    ASSERT_EQ(pieces.size(),
              static_cast<size_t>(sgd ? (c.momentum > 0 ? 2 : 0) : 4));
    for (size_t p = 0; p < pieces.size(); ++p) {
      const int k = static_cast<int>(p % 2);
      const bool second = p >= 2;
      ExpectSameBits(pieces[p].data->data(),
                     (second ? v.data() : m.data()) + at[k], sizes[k],
                     pieces[p].name);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, OptimizerGridMatchTest,
    ::testing::Values(
        Case{"sgd", OptimizerType::kSgd, 0, false, 0, 0},
        Case{"momentum", OptimizerType::kSgd, 0.9, false, 0, 0},
        Case{"nesterov_clip", OptimizerType::kSgd, 0.9, true, 0, 1.0},
        Case{"sgd_decay_clip", OptimizerType::kSgd, 0.9, false, 0.5, 1.0},
        Case{"adam", OptimizerType::kAdam, 0, false, 0, 0},
        Case{"adamw_clip", OptimizerType::kAdamW, 0, false, 0.004, 1.0}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// fp16's loss scaling in the kernels: gradients 2^12 times the true ones
// with unscale 2^-12 give the CPU's step on the true gradients bit for bit;
// an inf in one gradient skips the whole step (parameters and slots as
// they were), as does a finite sum of squares whose norm after unscaling
// is past float's range.
TEST(OptimizerGridTest, LossScalingUnscalesExactlyAndSkipsAnOverflow) {
  OptimizerSpec spec;
  spec.type = OptimizerType::kAdam;
  spec.learning_rate = 0.001;
  constexpr int64_t kN = 1000;
  Param p{"w", Tensor({kN}, RandomVector(kN, 3)), Tensor({kN})};
  absl::StatusOr<std::unique_ptr<Optimizer>> cpu =
      Optimizer::Create(spec, {&p});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const std::vector<FlatRun> runs = {{0, kN, 1, 0}};
  std::vector<float> w(p.value.data(), p.value.data() + kN), m(kN, 0.0f),
      v(kN, 0.0f);
  const Grid grid{256};
  const float scale = 4096.0f;
  auto step = [&](const std::vector<float>& g, float unscale,
                  const double* sum_squares) {
    AdamStep a = MakeAdamStep(spec.learning_rate, spec.beta_1, spec.beta_2,
                              spec.epsilon, 0, (*cpu)->iterations());
    a.clip = GradientClip{0, sum_squares, unscale, true};
    EachThread(grid, [&](int64_t first, int64_t stride) {
      AdamThread(first, stride, kN, runs.data(), 1, a, w.data(), m.data(),
                 v.data(), g.data());
    });
  };
  for (int s = 0; s < 3; ++s) {
    const std::vector<float> grad = RandomVector(kN, 20 + s, -0.5f, 0.5f);
    std::vector<float> scaled(grad);
    for (float& x : scaled) x *= scale;
    const double sum_squares = SumSquares(grid, kN, runs, scaled.data());
    step(scaled, 1.0f / scale, &sum_squares);
    std::memcpy(p.grad.data(), grad.data(), kN * sizeof(float));
    ASSERT_TRUE((*cpu)->Apply(spec.learning_rate, nullptr).ok());
  }
  ExpectSameBits(p.value.data(), w.data(), kN, "w after 3 scaled steps");

  const std::vector<float> w0 = w, m0 = m, v0 = v;
  std::vector<float> overflowed = RandomVector(kN, 30, -0.5f, 0.5f);
  overflowed[417] = std::numeric_limits<float>::infinity();
  const double inf_sum = SumSquares(grid, kN, runs, overflowed.data());
  ASSERT_TRUE(std::isinf(inf_sum));
  step(overflowed, 1.0f / scale, &inf_sum);
  // 1e78 is a finite double whose root, 1e39, is past FLT_MAX.
  const double past_float = 1e78;
  step(RandomVector(kN, 31, -0.5f, 0.5f), 1.0f, &past_float);
  // The test is after unscaling: a root of 1e35 is within float's range,
  // but times an unscale of 2^12 (a scale below 1) it is not.
  const double past_after_unscale = 1e70;
  step(RandomVector(kN, 32, -0.5f, 0.5f), 4096.0f, &past_after_unscale);
  ExpectSameBits(w0.data(), w.data(), kN, "w after skipped steps");
  ExpectSameBits(m0.data(), m.data(), kN, "m after skipped steps");
  ExpectSameBits(v0.data(), v.data(), kN, "v after skipped steps");
  // ... and 1e78's root times an unscale of 2^-12 is within it: the step
  // is taken.
  step(RandomVector(kN, 33, -0.5f, 0.5f), 1.0f / 4096.0f, &past_float);
  EXPECT_GE(FirstDifference(w0.data(), w.data(), kN), 0)
      << "a step whose unscaled norm is finite was skipped";

  // Without skip_nonfinite the same inf reaches the parameters.
  AdamStep a = MakeAdamStep(spec.learning_rate, spec.beta_1, spec.beta_2,
                            spec.epsilon, 0, (*cpu)->iterations());
  a.clip = GradientClip{0, &inf_sum, 1.0f / scale, false};
  EachThread(grid, [&](int64_t first, int64_t stride) {
    AdamThread(first, stride, kN, runs.data(), 1, a, w.data(), m.data(),
               v.data(), overflowed.data());
  });
  EXPECT_FALSE(std::isfinite(w[417]));
}

// Batch norm's moving averages: the kernel's threads against
// UpdateMovingAverages, bit for bit, and left as they were when the
// optimizer's step is skipped.
TEST(OptimizerGridTest, MovingAveragesMatchTheCpuAndSkipWithTheStep) {
  constexpr int64_t kN = 515;
  constexpr int64_t kSamples = 96;
  Param mean{"bn/moving_mean", Tensor({kN}, RandomVector(kN, 4)),
             Tensor({kN}, RandomVector(kN, 5, -40.0f, 40.0f)),
             ParamUpdate::kMovingAverage, 0.99f};
  const std::vector<float> start(mean.value.data(), mean.value.data() + kN);
  std::vector<float> value = start;
  const std::vector<float> g(mean.grad.data(), mean.grad.data() + kN);
  const double inv = 1.0 / static_cast<double>(kSamples);
  const Grid grid{192};
  auto run = [&](const double* skip, float unscale) {
    EachThread(grid, [&](int64_t first, int64_t stride) {
      MovingAverageThread(first, stride, kN, mean.momentum,
                          1.0f - mean.momentum, inv, value.data(), g.data(),
                          skip, unscale);
    });
  };
  run(nullptr, 1.0f);
  const double finite = 12.5;
  run(&finite, 1.0f);
  UpdateMovingAverages({&mean}, kSamples);
  UpdateMovingAverages({&mean}, kSamples);
  ExpectSameBits(mean.value.data(), value.data(), kN, "moving mean");
  EXPECT_GE(FirstDifference(start.data(), value.data(), kN), 0)
      << "two updates changed nothing";
  const std::vector<float> before = value;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  run(&nan, 1.0f);
  // Finite, but past float's range after an unscale of 2^12.
  const double past_after_unscale = 1e70;
  run(&past_after_unscale, 4096.0f);
  ExpectSameBits(before.data(), value.data(), kN, "after skipped steps");
  run(&past_after_unscale, 1.0f);
  EXPECT_GE(FirstDifference(before.data(), value.data(), kN), 0)
      << "a step within range was skipped";
}

}  // namespace
}  // namespace cuda
}  // namespace lockstep
