// Batch normalization kernels: row blocks in parallel, per-block channel
// sums, blocks combined in order (deterministic for any thread count).
#include "kernels/cpu/batch_norm.h"

#include <algorithm>

#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

int64_t Blocks(int64_t rows) {
  return (rows + kBatchNormRowBlock - 1) / kBatchNormRowBlock;
}

// Per channel, `terms` sums of f(row, channel, k) over the rows: each block
// of rows in float, in row order; the blocks in double, in block order.
// out[k * channels + c] receives sum k of channel c.
template <int kTerms, typename Fn>
void ChannelSums(int64_t rows, int64_t channels, Fn fn, double* out,
                 std::vector<double>* partials) {
  const int64_t blocks = Blocks(rows);
  partials->assign(blocks * kTerms * channels, 0.0);
  ParallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
    thread_local std::vector<float> acc;
    acc.resize(kTerms * channels);
    for (int64_t b = b0; b < b1; ++b) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      const int64_t end = std::min(rows, (b + 1) * kBatchNormRowBlock);
      for (int64_t r = b * kBatchNormRowBlock; r < end; ++r) {
        fn(r, acc.data());
      }
      double* dst = partials->data() + b * kTerms * channels;
      for (int64_t k = 0; k < kTerms * channels; ++k) dst[k] = acc[k];
    }
  });
  std::fill(out, out + kTerms * channels, 0.0);
  for (int64_t b = 0; b < blocks; ++b) {
    const double* p = partials->data() + b * kTerms * channels;
    for (int64_t k = 0; k < kTerms * channels; ++k) out[k] += p[k];
  }
}

}  // namespace

void BatchNormSums(int64_t rows, int64_t channels, const float* x,
                   double* sum, std::vector<double>* partials) {
  ChannelSums<1>(
      rows, channels,
      [&](int64_t r, float* acc) {
        const float* xr = x + r * channels;
        for (int64_t c = 0; c < channels; ++c) acc[c] += xr[c];
      },
      sum, partials);
}

void BatchNormShiftedSums(int64_t rows, int64_t channels, const float* x,
                          const float* shift, double* sums,
                          std::vector<double>* partials) {
  ChannelSums<2>(
      rows, channels,
      [&](int64_t r, float* acc) {
        const float* xr = x + r * channels;
        float* s1 = acc;
        float* s2 = acc + channels;
        for (int64_t c = 0; c < channels; ++c) {
          const float d = xr[c] - shift[c];
          s1[c] += d;
          s2[c] += d * d;
        }
      },
      sums, partials);
}

void BatchNormSquaredDeviations(int64_t rows, int64_t channels, const float* x,
                                const float* mean, double* out,
                                std::vector<double>* partials) {
  ChannelSums<1>(
      rows, channels,
      [&](int64_t r, float* acc) {
        const float* xr = x + r * channels;
        for (int64_t c = 0; c < channels; ++c) {
          const float d = xr[c] - mean[c];
          acc[c] += d * d;
        }
      },
      out, partials);
}

void BatchNormStatistics(int64_t rows, int64_t channels, const float* x,
                         float* mean, float* var,
                         std::vector<double>* partials) {
  // Per-call scratch kept per thread: a steady-state step allocates
  // nothing.
  thread_local std::vector<double> sums;
  sums.resize(channels);
  BatchNormSums(rows, channels, x, sums.data(), partials);
  for (int64_t c = 0; c < channels; ++c) {
    mean[c] = static_cast<float>(sums[c] / static_cast<double>(rows));
  }
  BatchNormSquaredDeviations(rows, channels, x, mean, sums.data(), partials);
  for (int64_t c = 0; c < channels; ++c) {
    var[c] = static_cast<float>(sums[c] / static_cast<double>(rows));
  }
}

void BatchNormForward(int64_t rows, int64_t channels, const float* x,
                      const float* mean, const float* rstd, const float* gamma,
                      const float* beta, float* y) {
  thread_local std::vector<float> scale;
  scale.resize(channels);
  for (int64_t c = 0; c < channels; ++c) scale[c] = gamma[c] * rstd[c];
  const float* sc = scale.data();
  // Centred first: x * scale + (beta - mean * scale) would cancel two large
  // terms where the mean is large against the spread.
  ParallelFor(rows, std::max<int64_t>(1, 16384 / channels),
              [&](int64_t b, int64_t e) {
                for (int64_t r = b; r < e; ++r) {
                  const float* xr = x + r * channels;
                  float* yr = y + r * channels;
                  for (int64_t c = 0; c < channels; ++c) {
                    yr[c] = (xr[c] - mean[c]) * sc[c] + beta[c];
                  }
                }
              });
}

void BatchNormBackwardSums(int64_t rows, int64_t channels, const float* x,
                           const float* dy, const float* mean, double* sums,
                           std::vector<double>* partials) {
  ChannelSums<2>(
      rows, channels,
      [&](int64_t r, float* acc) {
        const float* xr = x + r * channels;
        const float* dyr = dy + r * channels;
        float* s_dy = acc;
        float* s_dyx = acc + channels;
        for (int64_t c = 0; c < channels; ++c) {
          s_dy[c] += dyr[c];
          s_dyx[c] += dyr[c] * (xr[c] - mean[c]);
        }
      },
      sums, partials);
}

void BatchNormBackwardInput(int64_t rows, int64_t channels, const float* x,
                            const float* dy, const float* mean,
                            const float* rstd, const float* gamma,
                            const double* sums, double stat_rows, float* dx) {
  thread_local std::vector<float> a, b, k;
  a.resize(channels);
  b.resize(channels);
  k.resize(channels);
  for (int64_t c = 0; c < channels; ++c) {
    // dx = k * dy + a * (x - mean) + b.
    k[c] = gamma[c] * rstd[c];
    if (stat_rows > 0) {
      const double sum_dy = sums[c];
      const double sum_dy_xhat = sums[channels + c] * rstd[c];
      const double inv_rows = 1.0 / stat_rows;
      a[c] = static_cast<float>(-k[c] * sum_dy_xhat * inv_rows * rstd[c]);
      b[c] = static_cast<float>(-k[c] * sum_dy * inv_rows);
    } else {
      a[c] = 0.0f;
      b[c] = 0.0f;
    }
  }
  const float* kp = k.data();
  const float* ap = a.data();
  const float* bp = b.data();
  ParallelFor(rows, std::max<int64_t>(1, 16384 / channels),
              [&](int64_t r0, int64_t r1) {
                for (int64_t r = r0; r < r1; ++r) {
                  const float* xr = x + r * channels;
                  const float* dyr = dy + r * channels;
                  float* dxr = dx + r * channels;
                  for (int64_t c = 0; c < channels; ++c) {
                    dxr[c] = kp[c] * dyr[c] + ap[c] * (xr[c] - mean[c]) + bp[c];
                  }
                }
              });
}

void BatchNormBackward(int64_t rows, int64_t channels, const float* x,
                       const float* dy, const float* mean, const float* rstd,
                       const float* gamma, bool batch_statistics,
                       float* dgamma, float* dbeta, float* dx,
                       std::vector<double>* partials) {
  thread_local std::vector<double> sums;
  sums.resize(2 * channels);
  BatchNormBackwardSums(rows, channels, x, dy, mean, sums.data(), partials);
  for (int64_t c = 0; c < channels; ++c) {
    dgamma[c] += static_cast<float>(sums[channels + c] * rstd[c]);
    dbeta[c] += static_cast<float>(sums[c]);
  }
  if (dx == nullptr) return;
  BatchNormBackwardInput(rows, channels, x, dy, mean, rstd, gamma,
                         sums.data(),
                         batch_statistics ? static_cast<double>(rows) : 0.0,
                         dx);
}

}  // namespace lockstep
