#include "kernels/cpu/pool.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

struct Case {
  int64_t n, h, w, c, ph, pw, sh, sw;
  int64_t pad_h = 0, pad_w = 0;  // cells on each side that never win
};

class PoolTest : public ::testing::TestWithParam<std::tuple<Case, int>> {};

TEST_P(PoolTest, MatchesNaive) {
  const auto [cs, threads] = GetParam();
  SetNumThreads(threads);
  const Pool2DGeometry g = Pool2DGeometry::Make(
      cs.n, cs.h, cs.w, cs.c, cs.ph, cs.pw, cs.sh, cs.sw, cs.pad_h, cs.pad_w);
  std::vector<float> x = RandomVector(cs.n * g.in_size(), 1);
  std::vector<float> y(cs.n * g.out_size());
  std::vector<int32_t> arg(y.size());
  MaxPool2DForward(g, x.data(), y.data(), arg.data());
  std::vector<float> dy = RandomVector(y.size(), 2);
  std::vector<double> want_dx(x.size(), 0);
  for (int64_t n = 0; n < cs.n; ++n)
    for (int64_t oh = 0; oh < g.out_h; ++oh)
      for (int64_t ow = 0; ow < g.out_w; ++ow)
        for (int64_t c = 0; c < cs.c; ++c) {
          float best = -1e30f;
          int64_t where = -1;
          for (int64_t i = 0; i < cs.ph; ++i)
            for (int64_t j = 0; j < cs.pw; ++j) {
              const int64_t ih = oh * cs.sh - cs.pad_h + i;
              const int64_t iw = ow * cs.sw - cs.pad_w + j;
              if (ih < 0 || ih >= cs.h || iw < 0 || iw >= cs.w) continue;
              const int64_t idx = ((n * cs.h + ih) * cs.w + iw) * cs.c + c;
              if (x[idx] > best) best = x[idx], where = idx;
            }
          const int64_t o = ((n * g.out_h + oh) * g.out_w + ow) * cs.c + c;
          ASSERT_EQ(y[o], best);
          ASSERT_EQ(arg[o] + n * g.in_size(), where);
          want_dx[where] += dy[o];
        }
  std::vector<float> dx(x.size(), 9);
  MaxPool2DBackward(g, dy.data(), arg.data(), dx.data());
  for (size_t i = 0; i < dx.size(); ++i) ASSERT_NEAR(dx[i], want_dx[i], 1e-6);
}

// Average pooling against a double-precision naive loop, with the pads
// counted in the divisor and not: forward, and backward (each window's
// dy / divisor added to its cells) from a dx holding garbage.
TEST_P(PoolTest, AverageMatchesNaive) {
  const auto [cs, threads] = GetParam();
  SetNumThreads(threads);
  const Pool2DGeometry g = Pool2DGeometry::Make(
      cs.n, cs.h, cs.w, cs.c, cs.ph, cs.pw, cs.sh, cs.sw, cs.pad_h, cs.pad_w);
  std::vector<float> x = RandomVector(cs.n * g.in_size(), 3);
  std::vector<float> dy = RandomVector(cs.n * g.out_size(), 4);
  for (bool include : {true, false}) {
    std::vector<float> y(dy.size(), 9);
    AvgPool2DForward(g, include, x.data(), y.data());
    std::vector<double> want_dx(x.size(), 0);
    for (int64_t n = 0; n < cs.n; ++n)
      for (int64_t oh = 0; oh < g.out_h; ++oh)
        for (int64_t ow = 0; ow < g.out_w; ++ow)
          for (int64_t c = 0; c < cs.c; ++c) {
            double sum = 0;
            int64_t cells = 0;
            std::vector<int64_t> at;
            for (int64_t i = 0; i < cs.ph; ++i)
              for (int64_t j = 0; j < cs.pw; ++j) {
                const int64_t ih = oh * cs.sh - cs.pad_h + i;
                const int64_t iw = ow * cs.sw - cs.pad_w + j;
                if (ih < 0 || ih >= cs.h || iw < 0 || iw >= cs.w) continue;
                at.push_back(((n * cs.h + ih) * cs.w + iw) * cs.c + c);
                sum += x[at.back()];
                ++cells;
              }
            const double count = include ? cs.ph * cs.pw : cells;
            const int64_t o = ((n * g.out_h + oh) * g.out_w + ow) * cs.c + c;
            ASSERT_NEAR(y[o], sum / count, 1e-6) << include;
            for (int64_t i : at) want_dx[i] += dy[o] / count;
          }
    std::vector<float> dx(x.size(), 9);
    AvgPool2DBackward(g, include, dy.data(), dx.data());
    for (size_t i = 0; i < dx.size(); ++i) {
      ASSERT_NEAR(dx[i], want_dx[i], 1e-6) << include << " at " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PoolTest,
    ::testing::Combine(::testing::Values(Case{2, 6, 6, 3, 2, 2, 2, 2},
                                         Case{3, 7, 5, 4, 2, 2, 2, 2},
                                         Case{2, 9, 9, 2, 3, 3, 2, 2},
                                         Case{1, 5, 8, 1, 3, 2, 1, 3},
                                         Case{2, 7, 9, 5, 3, 3, 2, 2},
                                         Case{2, 8, 8, 6, 2, 2, 3, 3},
                                         Case{0, 4, 4, 2, 2, 2, 2, 2},
                                         // PyTorch's padded windows
                                         // (ResNet's stem: 3x3, stride 2,
                                         // padding 1).
                                         Case{2, 8, 8, 5, 3, 3, 2, 2, 1, 1},
                                         Case{1, 7, 6, 4, 3, 3, 2, 2, 1, 1},
                                         Case{2, 5, 9, 3, 2, 3, 1, 2, 1, 1},
                                         Case{1, 6, 6, 8, 2, 2, 2, 2, 1, 0},
                                         Case{2, 1, 1, 3, 1, 1, 1, 1}),
                       ::testing::Values(1, 3)));

// The mean of each channel, summed in position order (the order the GPU
// kernel uses too), for 1 and 3 threads; backward spreads dy / hw.
TEST(GlobalAvgPoolTest, MeansPerChannelAndSpreadsTheGradient) {
  for (int threads : {1, 3}) {
    SetNumThreads(threads);
    const int64_t n = 3, hw = 7 * 5, c = 6;
    std::vector<float> x = RandomVector(n * hw * c, 4);
    std::vector<float> y(n * c, 9.0f);
    GlobalAvgPool2DForward(n, hw, c, x.data(), y.data());
    for (int64_t s = 0; s < n; ++s) {
      for (int64_t ch = 0; ch < c; ++ch) {
        float acc = 0.0f;
        for (int64_t p = 0; p < hw; ++p) acc += x[(s * hw + p) * c + ch];
        ASSERT_EQ(y[s * c + ch], acc / static_cast<float>(hw))
            << "sample " << s << " channel " << ch;
      }
    }
    std::vector<float> dy = RandomVector(n * c, 5);
    std::vector<float> dx(x.size(), 9.0f);
    GlobalAvgPool2DBackward(n, hw, c, dy.data(), dx.data());
    for (int64_t i = 0; i < n * hw * c; ++i) {
      ASSERT_EQ(dx[i], dy[(i / (hw * c)) * c + i % c] / 35.0f) << i;
    }
  }
  // Exact small case: channels (1, 10), (2, 20), (3, 30), (6, 60).
  const float x[8] = {1, 10, 2, 20, 3, 30, 6, 60};
  float y[2];
  GlobalAvgPool2DForward(1, 4, 2, x, y);
  EXPECT_EQ(y[0], 3.0f);
  EXPECT_EQ(y[1], 30.0f);
  GlobalAvgPool2DForward(0, 4, 2, nullptr, nullptr);  // an empty batch
}

TEST(PoolGeometryTest, ValidPadding) {
  Pool2DGeometry g = Pool2DGeometry::Make(1, 26, 26, 32, 2, 2, 2, 2);
  EXPECT_EQ(g.out_h, 13);
  EXPECT_EQ(g.out_w, 13);
  g = Pool2DGeometry::Make(1, 7, 7, 1, 2, 2, 2, 2);
  EXPECT_EQ(g.out_h, 3);
  g = Pool2DGeometry::Make(1, 1, 7, 1, 2, 2, 2, 2);
  EXPECT_EQ(g.out_h, 0);
}

}  // namespace
}  // namespace lockstep
