// Depthwise convolution against a naive double-precision reference, for
// strides 1 and 2, valid and same padding, multipliers 1 and 2; the same
// bits for any thread count.
#include "kernels/cpu/depthwise.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

struct Case {
  int64_t n, h, w, c, k, stride, mult;
  bool same;
};

class DepthwiseTest : public ::testing::TestWithParam<Case> {};

TEST_P(DepthwiseTest, MatchesNaiveAndIsThreadCountFree) {
  const Case p = GetParam();
  const Conv2DGeometry g = Conv2DGeometry::Make(
      p.n, p.h, p.w, p.c, p.k, p.k, p.c * p.mult, p.stride, p.stride, p.same);
  const int64_t cm = g.filters;
  const std::vector<float> x = RandomVector(p.n * p.h * p.w * p.c, 1);
  const std::vector<float> k = RandomVector(p.k * p.k * cm, 2);
  const std::vector<float> bias = RandomVector(cm, 3);
  const std::vector<float> dy = RandomVector(g.rows() * cm, 4);
  auto at = [&](int64_t n, int64_t ih, int64_t iw, int64_t c) -> double {
    if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) return 0.0;
    return x[((n * p.h + ih) * p.w + iw) * p.c + c];
  };
  std::vector<double> want_y(g.rows() * cm), want_dk(k.size(), 0.0),
      want_dx(x.size(), 0.0);
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t oh = 0; oh < g.out_h; ++oh)
      for (int64_t ow = 0; ow < g.out_w; ++ow)
        for (int64_t o = 0; o < cm; ++o) {
          const int64_t c = o / p.mult;
          const int64_t r = (n * g.out_h + oh) * g.out_w + ow;
          double s = bias[o];
          for (int64_t kh = 0; kh < p.k; ++kh)
            for (int64_t kw = 0; kw < p.k; ++kw) {
              const int64_t ih = oh * p.stride - g.pad_top + kh;
              const int64_t iw = ow * p.stride - g.pad_left + kw;
              const double kv = k[(kh * p.k + kw) * cm + o];
              s += at(n, ih, iw, c) * kv;
              want_dk[(kh * p.k + kw) * cm + o] +=
                  at(n, ih, iw, c) * dy[r * cm + o];
              if (ih >= 0 && ih < p.h && iw >= 0 && iw < p.w) {
                want_dx[((n * p.h + ih) * p.w + iw) * p.c + c] +=
                    kv * dy[r * cm + o];
              }
            }
          want_y[r * cm + o] = s;
        }
  std::vector<std::vector<float>> ys, dks, dxs;
  for (int threads : {1, 3}) {
    SetNumThreads(threads);
    std::vector<float> y(want_y.size(), 9.0f), dk(k.size(), 9.0f),
        dx(x.size(), 9.0f), partials;
    DepthwiseConv2DForward(g, x.data(), k.data(), bias.data(), y.data());
    DepthwiseConv2DBackward(g, x.data(), k.data(), dy.data(), dk.data(),
                            dx.data(), &partials);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want_y[i], 1e-5);
    for (size_t i = 0; i < dk.size(); ++i) {
      ASSERT_NEAR(dk[i], want_dk[i], 1e-4 * (1 + std::fabs(want_dk[i])));
    }
    for (size_t i = 0; i < dx.size(); ++i) ASSERT_NEAR(dx[i], want_dx[i], 1e-5);
    ys.push_back(y);
    dks.push_back(dk);
    dxs.push_back(dx);
  }
  EXPECT_EQ(ys[0], ys[1]);
  EXPECT_EQ(dks[0], dks[1]);
  EXPECT_EQ(dxs[0], dxs[1]);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DepthwiseTest,
    ::testing::Values(Case{2, 7, 6, 5, 3, 1, 1, true},    // same, stride 1
                      Case{2, 8, 7, 4, 3, 2, 1, true},    // same, stride 2
                      Case{1, 9, 9, 3, 3, 2, 1, false},   // valid, stride 2
                      Case{2, 5, 6, 3, 3, 1, 2, false},   // multiplier 2
                      Case{3, 30, 30, 8, 3, 1, 1, true},  // several blocks
                      Case{1, 1, 1, 4, 3, 1, 1, true}));  // all padding

}  // namespace
}  // namespace lockstep
