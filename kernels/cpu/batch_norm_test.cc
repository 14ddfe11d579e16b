// The batch-norm kernels against a double-precision reference written from
// the definitions, and the same bits for any thread count.
#include "kernels/cpu/batch_norm.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

struct Reference {
  std::vector<double> mean, var, y, dx, dgamma, dbeta;
};

// Straight from the definitions, in double: xhat = (x - mean) / sqrt(var +
// eps); y = xhat * gamma + beta; with batch statistics,
// dx = gamma / sqrt(var + eps) * (dy - mean(dy) - xhat * mean(dy * xhat)).
Reference Compute(int64_t rows, int64_t ch, const std::vector<float>& x,
                  const std::vector<float>& dy, const std::vector<float>& gamma,
                  const std::vector<float>& beta, double eps) {
  Reference r;
  r.mean.assign(ch, 0);
  r.var.assign(ch, 0);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t c = 0; c < ch; ++c) r.mean[c] += x[i * ch + c];
  }
  for (double& m : r.mean) m /= rows;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t c = 0; c < ch; ++c) {
      const double d = x[i * ch + c] - r.mean[c];
      r.var[c] += d * d;
    }
  }
  for (double& v : r.var) v /= rows;
  r.y.resize(rows * ch);
  r.dx.resize(rows * ch);
  r.dgamma.assign(ch, 0);
  r.dbeta.assign(ch, 0);
  std::vector<double> mdy(ch, 0), mdyx(ch, 0);
  auto xhat = [&](int64_t i, int64_t c) {
    return (x[i * ch + c] - r.mean[c]) / std::sqrt(r.var[c] + eps);
  };
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t c = 0; c < ch; ++c) {
      r.y[i * ch + c] = xhat(i, c) * gamma[c] + beta[c];
      r.dbeta[c] += dy[i * ch + c];
      r.dgamma[c] += dy[i * ch + c] * xhat(i, c);
    }
  }
  for (int64_t c = 0; c < ch; ++c) {
    mdy[c] = r.dbeta[c] / rows;
    mdyx[c] = r.dgamma[c] / rows;
  }
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t c = 0; c < ch; ++c) {
      r.dx[i * ch + c] = gamma[c] / std::sqrt(r.var[c] + eps) *
                         (dy[i * ch + c] - mdy[c] - xhat(i, c) * mdyx[c]);
    }
  }
  return r;
}

double MaxAbs(const std::vector<double>& v) {
  double m = 0;
  for (double d : v) m = std::max(m, std::fabs(d));
  return m;
}

TEST(BatchNormTest, TrainingPassesMatchTheDefinitions) {
  // 700 rows: two whole blocks of 256 and a partial one.
  const int64_t rows = 700, ch = 5;
  const double eps = 1e-3;
  // An offset mean and a spread variance per channel.
  std::vector<float> x = RandomVector(rows * ch, 1, -2.0f, 2.0f);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t c = 0; c < ch; ++c) x[i * ch + c] = x[i * ch + c] * (c + 1) + 3 * c;
  }
  const std::vector<float> dy = RandomVector(rows * ch, 2);
  const std::vector<float> gamma = RandomVector(ch, 3, 0.5f, 1.5f);
  const std::vector<float> beta = RandomVector(ch, 4);
  const Reference ref = Compute(rows, ch, x, dy, gamma, beta, eps);

  std::vector<double> partials;
  std::vector<float> mean(ch), var(ch), rstd(ch);
  BatchNormStatistics(rows, ch, x.data(), mean.data(), var.data(), &partials);
  for (int64_t c = 0; c < ch; ++c) {
    EXPECT_NEAR(mean[c], ref.mean[c], 1e-6 * (1 + std::fabs(ref.mean[c])));
    EXPECT_NEAR(var[c], ref.var[c], 1e-6 * ref.var[c]);
    rstd[c] = 1.0f / std::sqrt(var[c] + static_cast<float>(eps));
  }
  std::vector<float> y(rows * ch);
  BatchNormForward(rows, ch, x.data(), mean.data(), rstd.data(), gamma.data(),
                   beta.data(), y.data());
  for (int64_t k = 0; k < rows * ch; ++k) {
    ASSERT_NEAR(y[k], ref.y[k], 2e-5) << k;
  }
  // The parameter gradients are added to what is there.
  std::vector<float> dgamma(ch, 1.0f), dbeta(ch, -1.0f), dx(rows * ch);
  BatchNormBackward(rows, ch, x.data(), dy.data(), mean.data(), rstd.data(),
                    gamma.data(), true, dgamma.data(), dbeta.data(), dx.data(),
                    &partials);
  for (int64_t c = 0; c < ch; ++c) {
    EXPECT_NEAR(dgamma[c] - 1.0, ref.dgamma[c], 1e-4);
    EXPECT_NEAR(dbeta[c] + 1.0, ref.dbeta[c], 1e-4);
  }
  const double scale = MaxAbs(ref.dx);
  for (int64_t k = 0; k < rows * ch; ++k) {
    ASSERT_NEAR(dx[k], ref.dx[k], 1e-5 * scale) << k;
  }
}

// A channel whose mean is 1000 times its spread (a conv output over a 2x2
// map can be): normalizing must not cancel two large terms.
TEST(BatchNormTest, LargeMeanSmallSpreadKeepsItsPrecision) {
  const int64_t rows = 16, ch = 1;
  std::vector<float> x = RandomVector(rows, 11, -0.01f, 0.01f);
  for (float& v : x) v += 10.0f;
  const std::vector<float> dy = RandomVector(rows, 12);
  const std::vector<float> gamma = {1.0f}, beta = {0.0f};
  const Reference ref = Compute(rows, ch, x, dy, gamma, beta, 1e-5);
  std::vector<double> partials;
  std::vector<float> mean(1), var(1), rstd(1), y(rows);
  BatchNormStatistics(rows, ch, x.data(), mean.data(), var.data(), &partials);
  rstd[0] = 1.0f / std::sqrt(var[0] + 1e-5f);
  BatchNormForward(rows, ch, x.data(), mean.data(), rstd.data(), gamma.data(),
                   beta.data(), y.data());
  // |y| is about 1; x is 10 to 6e-7, so y can only be good to ~2e-4
  // (x's own rounding over the spread); x * scale + shift loses ~10x more.
  for (int64_t k = 0; k < rows; ++k) EXPECT_NEAR(y[k], ref.y[k], 5e-5) << k;
}

TEST(BatchNormTest, InferenceBackwardIsTheAffineMap) {
  const int64_t rows = 9, ch = 3;
  const std::vector<float> x = RandomVector(rows * ch, 5);
  const std::vector<float> dy = RandomVector(rows * ch, 6);
  const std::vector<float> mean = {0.5f, -1.0f, 2.0f};
  const std::vector<float> rstd = {2.0f, 0.25f, 1.0f};
  const std::vector<float> gamma = {1.5f, -2.0f, 0.5f};
  std::vector<float> dgamma(ch, 0.0f), dbeta(ch, 0.0f), dx(rows * ch);
  std::vector<double> partials;
  BatchNormBackward(rows, ch, x.data(), dy.data(), mean.data(), rstd.data(),
                    gamma.data(), false, dgamma.data(), dbeta.data(), dx.data(),
                    &partials);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t c = 0; c < ch; ++c) {
      EXPECT_FLOAT_EQ(dx[i * ch + c], gamma[c] * rstd[c] * dy[i * ch + c]);
    }
  }
  for (int64_t c = 0; c < ch; ++c) {
    double s = 0, sx = 0;
    for (int64_t i = 0; i < rows; ++i) {
      s += dy[i * ch + c];
      sx += dy[i * ch + c] * (x[i * ch + c] - mean[c]) * rstd[c];
    }
    EXPECT_NEAR(dbeta[c], s, 1e-5);
    EXPECT_NEAR(dgamma[c], sx, 1e-5);
  }
}

TEST(BatchNormTest, SameBitsForAnyThreadCount) {
  const int64_t rows = 3000, ch = 7;
  const std::vector<float> x = RandomVector(rows * ch, 7);
  const std::vector<float> dy = RandomVector(rows * ch, 8);
  const std::vector<float> gamma = RandomVector(ch, 9);
  std::vector<float> results[2];
  for (int threads : {1, 2}) {
    SetNumThreads(threads);
    std::vector<double> partials;
    std::vector<float> mean(ch), var(ch), rstd(ch, 0.5f);
    BatchNormStatistics(rows, ch, x.data(), mean.data(), var.data(),
                        &partials);
    std::vector<float> dgamma(ch, 0.0f), dbeta(ch, 0.0f), dx(rows * ch);
    BatchNormBackward(rows, ch, x.data(), dy.data(), mean.data(), rstd.data(),
                      gamma.data(), true, dgamma.data(), dbeta.data(),
                      dx.data(), &partials);
    std::vector<float>& out = results[threads - 1];
    out = mean;
    out.insert(out.end(), var.begin(), var.end());
    out.insert(out.end(), dgamma.begin(), dgamma.end());
    out.insert(out.end(), dx.begin(), dx.end());
  }
  SetNumThreads(0);
  EXPECT_EQ(results[0], results[1]);
}

}  // namespace
}  // namespace lockstep
