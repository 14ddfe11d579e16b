// GPU batch norm against kernels/cpu/batch_norm.h, bit for bit: the
// statistics, the forward, the backward in both modes (with more rows than
// one block), the running statistics' "gradients" and their update.
#include "kernels/cuda/layers/batch_norm.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/batch_norm.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cuda/cuda_test_util.h"

namespace lockstep {
namespace cuda {
namespace {

class BatchNormCudaTest : public ::testing::TestWithParam<bool> {};

TEST_P(BatchNormCudaTest, MatchesTheCpuBitForBit) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const bool batch_statistics = GetParam();
  const int64_t rows = 700, ch = 6;  // two whole blocks of 256 and a part
  std::vector<float> x = RandomVector(rows * ch, 1, -2.0f, 2.0f);
  for (int64_t i = 0; i < rows * ch; ++i) x[i] += 3.0f * (i % ch);
  const std::vector<float> dy = RandomVector(rows * ch, 2);
  const std::vector<float> gamma = RandomVector(ch, 3, 0.5f, 1.5f);
  const std::vector<float> beta = RandomVector(ch, 4);
  const float eps = 1e-5f;

  std::vector<double> partials;
  std::vector<float> mean(ch), var(ch), rstd(ch), y(rows * ch), dx(rows * ch);
  lockstep::BatchNormStatistics(rows, ch, x.data(), mean.data(), var.data(),
                                &partials);
  for (int64_t c = 0; c < ch; ++c) rstd[c] = 1.0f / std::sqrt(var[c] + eps);
  lockstep::BatchNormForward(rows, ch, x.data(), mean.data(), rstd.data(),
                             gamma.data(), beta.data(), y.data());
  std::vector<float> dgamma(ch, 0.5f), dbeta(ch, -0.5f);
  lockstep::BatchNormBackward(rows, ch, x.data(), dy.data(), mean.data(),
                              rstd.data(), gamma.data(), batch_statistics,
                              dgamma.data(), dbeta.data(), dx.data(),
                              &partials);

  DeviceArray<float> d_x(x), d_dy(dy), d_gamma(gamma), d_beta(beta),
      d_mean(ch), d_var(ch), d_rstd(ch), d_y(rows * ch), d_dx(rows * ch),
      d_dgamma(std::vector<float>(ch, 0.5f)),
      d_dbeta(std::vector<float>(ch, -0.5f)), d_coef(3 * ch);
  DeviceArray<double> ws(BatchNormWorkspaceDoubles(rows, ch));
  ASSERT_EQ(cuda::BatchNormStatistics(rows, ch, d_x.get(), d_mean.get(),
                                      d_var.get(), ws.get(), nullptr),
            cudaSuccess);
  ASSERT_EQ(cuda::BatchNormRstd(ch, d_var.get(), eps, d_rstd.get(), nullptr),
            cudaSuccess);
  ASSERT_EQ(cuda::BatchNormForward(rows, ch, d_x.get(), d_mean.get(),
                                   d_rstd.get(), d_gamma.get(), d_beta.get(),
                                   d_y.get(), nullptr),
            cudaSuccess);
  ASSERT_EQ(cuda::BatchNormBackward(
                rows, ch, d_x.get(), d_dy.get(), d_mean.get(), d_rstd.get(),
                d_gamma.get(), batch_statistics, d_dgamma.get(),
                d_dbeta.get(), d_dx.get(), ws.get(), d_coef.get(), nullptr),
            cudaSuccess);
  ExpectSameBits(mean, d_mean.ToHost(), "mean");
  ExpectSameBits(var, d_var.ToHost(), "var");
  ExpectSameBits(rstd, d_rstd.ToHost(), "rstd");
  ExpectSameBits(y, d_y.ToHost(), "y");
  ExpectSameBits(dgamma, d_dgamma.ToHost(), "dgamma");
  ExpectSameBits(dbeta, d_dbeta.ToHost(), "dbeta");
  ExpectSameBits(dx, d_dx.ToHost(), "dx");

  // The statistics' "gradients" and the moving-average step, as the CPU
  // layer and core/train/optimizer.cc compute them.
  std::vector<float> dmean(ch, 1.0f), dvar(ch, 2.0f), running(ch, 0.25f);
  const float samples = 7.0f;
  const double bessel = 700.0 / 699.0;
  for (int64_t c = 0; c < ch; ++c) {
    dmean[c] += samples * mean[c];
    dvar[c] += static_cast<float>(samples * (var[c] * bessel));
  }
  DeviceArray<float> d_dmean(std::vector<float>(ch, 1.0f)),
      d_dvar(std::vector<float>(ch, 2.0f)),
      d_running(std::vector<float>(ch, 0.25f));
  ASSERT_EQ(cuda::BatchNormAddStatistics(ch, samples, bessel, d_mean.get(),
                                         d_var.get(), d_dmean.get(),
                                         d_dvar.get(), nullptr),
            cudaSuccess);
  ExpectSameBits(dmean, d_dmean.ToHost(), "dmean");
  ExpectSameBits(dvar, d_dvar.ToHost(), "dvar");
  const float keep = 0.9f, take = 1.0f - keep;
  const double inv = 1.0 / 14.0;
  for (int64_t c = 0; c < ch; ++c) {
    running[c] = running[c] * keep + static_cast<float>(dvar[c] * inv) * take;
  }
  ASSERT_EQ(cuda::MovingAverageUpdate(ch, keep, inv, d_running.get(),
                                      d_dvar.get(), nullptr),
            cudaSuccess);
  ExpectSameBits(running, d_running.ToHost(), "running");
  // fp16's skipped step (the gradients' sum of squares not finite) leaves
  // the averages; a finite one updates them as above.
  for (double sum : {static_cast<double>(INFINITY), 4.0}) {
    DeviceArray<float> d_avg(std::vector<float>(ch, 0.25f));
    DeviceArray<double> d_sum(std::vector<double>{sum});
    ASSERT_EQ(
        cuda::MovingAverageUpdate(ch, keep, inv, d_avg.get(), d_dvar.get(),
                                  nullptr, d_sum.get(), 1.0f),
        cudaSuccess);
    const std::vector<float> avg = d_avg.ToHost();
    if (std::isinf(sum)) {
      EXPECT_EQ(avg, std::vector<float>(ch, 0.25f));
    } else {
      std::vector<float> want(ch);
      for (int64_t c = 0; c < ch; ++c) {
        want[c] = 0.25f * keep + static_cast<float>(dvar[c] * inv) * take;
      }
      ExpectSameBits(want, avg, "running after a finite step");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, BatchNormCudaTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "BatchStatistics"
                                             : "RunningStatistics";
                         });

// Sync batch norm's pieces: each kind of channel sums, the parameter
// gradients from this replica's sums and dx from summed ones, bit for bit
// with the CPU kernels.
TEST(BatchNormCudaSyncTest, SumsAndInputGradMatchTheCpuBitForBit) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t rows = 600, ch = 5;
  std::vector<float> x = RandomVector(rows * ch, 11, -2.0f, 2.0f);
  for (int64_t i = 0; i < rows * ch; ++i) x[i] += 2.0f * (i % ch);
  const std::vector<float> dy = RandomVector(rows * ch, 12);
  const std::vector<float> center = RandomVector(ch, 13, 0.0f, 8.0f);
  const std::vector<float> rstd = RandomVector(ch, 14, 0.5f, 2.0f);
  const std::vector<float> gamma = RandomVector(ch, 15, 0.5f, 1.5f);
  std::vector<double> partials, shifted(2 * ch), squared(ch), back(2 * ch);
  lockstep::BatchNormShiftedSums(rows, ch, x.data(), center.data(),
                                 shifted.data(), &partials);
  lockstep::BatchNormSquaredDeviations(rows, ch, x.data(), center.data(),
                                       squared.data(), &partials);
  lockstep::BatchNormBackwardSums(rows, ch, x.data(), dy.data(),
                                  center.data(), back.data(), &partials);
  DeviceArray<float> d_x(x), d_dy(dy), d_center(center), d_rstd(rstd),
      d_gamma(gamma), d_dx(rows * ch), d_coef(3 * ch),
      d_dgamma(std::vector<float>(ch, 0.5f)),
      d_dbeta(std::vector<float>(ch, -0.5f));
  DeviceArray<double> ws(BatchNormWorkspaceDoubles(rows, ch)), d_sums(2 * ch);
  auto sums = [&](BatchNormSumKind kind, int64_t width) {
    EXPECT_EQ(BatchNormChannelSums(kind, rows, ch, d_x.get(), d_dy.get(),
                                   d_center.get(), d_sums.get(), ws.get(),
                                   nullptr),
              cudaSuccess);
    std::vector<double> got = d_sums.ToHost();
    got.resize(width);
    return got;
  };
  EXPECT_EQ(sums(BatchNormSumKind::kShifted, 2 * ch), shifted);
  EXPECT_EQ(sums(BatchNormSumKind::kSquared, ch), squared);
  EXPECT_EQ(sums(BatchNormSumKind::kBackward, 2 * ch), back);

  // dgamma and dbeta from this replica's sums (the CPU layer's sync path).
  std::vector<float> dgamma(ch, 0.5f), dbeta(ch, -0.5f);
  for (int64_t c = 0; c < ch; ++c) {
    dgamma[c] += static_cast<float>(back[ch + c] * rstd[c]);
    dbeta[c] += static_cast<float>(back[c]);
  }
  ASSERT_EQ(BatchNormAddParamGrads(ch, d_sums.get(), d_rstd.get(),
                                   d_dgamma.get(), d_dbeta.get(), nullptr),
            cudaSuccess);
  ExpectSameBits(dgamma, d_dgamma.ToHost(), "dgamma");
  ExpectSameBits(dbeta, d_dbeta.ToHost(), "dbeta");
  // dx over three replicas' rows (the sums as if summed elsewhere).
  std::vector<float> dx(rows * ch);
  lockstep::BatchNormBackwardInput(rows, ch, x.data(), dy.data(),
                                   center.data(), rstd.data(), gamma.data(),
                                   back.data(), 3.0 * rows, dx.data());
  ASSERT_EQ(BatchNormInputGrad(rows, ch, d_x.get(), d_dy.get(),
                               d_center.get(), d_rstd.get(), d_gamma.get(),
                               d_sums.get(), 3.0 * rows, d_coef.get(),
                               d_dx.get(), nullptr),
            cudaSuccess);
  ExpectSameBits(dx, d_dx.ToHost(), "dx");
}

}  // namespace
}  // namespace cuda
}  // namespace lockstep
