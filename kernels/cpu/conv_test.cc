#include "kernels/cpu/conv.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

struct Case {
  int64_t n, h, w, c, kh, kw, f, sh, sw;
  bool same;
  int64_t dh = 1, dw = 1;  // dilation
};

float At(const Conv2DGeometry& g, const std::vector<float>& x, int64_t n,
         int64_t ih, int64_t iw, int64_t c) {
  if (ih < 0 || ih >= g.in_h || iw < 0 || iw >= g.in_w) return 0;
  return x[((n * g.in_h + ih) * g.in_w + iw) * g.in_c + c];
}

// Direct convolution and its gradients with plain loops.
void NaiveConv(const Conv2DGeometry& g, const std::vector<float>& x,
               const std::vector<float>& k, const std::vector<float>& b,
               std::vector<float>* y) {
  y->assign(g.rows() * g.filters, 0);
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t oh = 0; oh < g.out_h; ++oh)
      for (int64_t ow = 0; ow < g.out_w; ++ow)
        for (int64_t f = 0; f < g.filters; ++f) {
          double s = b[f];
          for (int64_t i = 0; i < g.k_h; ++i)
            for (int64_t j = 0; j < g.k_w; ++j)
              for (int64_t c = 0; c < g.in_c; ++c)
                s += At(g, x, n, oh * g.stride_h - g.pad_top + i * g.dil_h,
                        ow * g.stride_w - g.pad_left + j * g.dil_w, c) *
                     k[((i * g.k_w + j) * g.in_c + c) * g.filters + f];
          (*y)[((n * g.out_h + oh) * g.out_w + ow) * g.filters + f] = s;
        }
}

void NaiveConvGrad(const Conv2DGeometry& g, const std::vector<float>& x,
                   const std::vector<float>& k, const std::vector<float>& dy,
                   std::vector<double>* dk, std::vector<double>* db,
                   std::vector<double>* dx) {
  dk->assign(k.size(), 0);
  db->assign(g.filters, 0);
  dx->assign(x.size(), 0);
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t oh = 0; oh < g.out_h; ++oh)
      for (int64_t ow = 0; ow < g.out_w; ++ow)
        for (int64_t f = 0; f < g.filters; ++f) {
          const double d =
              dy[((n * g.out_h + oh) * g.out_w + ow) * g.filters + f];
          (*db)[f] += d;
          for (int64_t i = 0; i < g.k_h; ++i)
            for (int64_t j = 0; j < g.k_w; ++j)
              for (int64_t c = 0; c < g.in_c; ++c) {
                const int64_t ih = oh * g.stride_h - g.pad_top + i * g.dil_h;
                const int64_t iw = ow * g.stride_w - g.pad_left + j * g.dil_w;
                const int64_t ki =
                    ((i * g.k_w + j) * g.in_c + c) * g.filters + f;
                (*dk)[ki] += d * At(g, x, n, ih, iw, c);
                if (ih >= 0 && ih < g.in_h && iw >= 0 && iw < g.in_w) {
                  (*dx)[((n * g.in_h + ih) * g.in_w + iw) * g.in_c + c] +=
                      d * k[ki];
                }
              }
        }
}

class ConvTest
    : public ::testing::TestWithParam<std::tuple<Case, int, int64_t>> {};

TEST_P(ConvTest, MatchesDirectConvolution) {
  const auto [cs, threads, max_patch_floats] = GetParam();
  SetNumThreads(threads);
  const Conv2DGeometry g =
      Conv2DGeometry::Make(cs.n, cs.h, cs.w, cs.c, cs.kh, cs.kw, cs.f, cs.sh,
                           cs.sw, cs.same, cs.dh, cs.dw);
  std::vector<float> x = RandomVector(cs.n * cs.h * cs.w * cs.c, 1);
  std::vector<float> k = RandomVector(cs.kh * cs.kw * cs.c * cs.f, 2);
  std::vector<float> b = RandomVector(cs.f, 3);
  ConvWorkspace ws;
  ws.max_patch_floats = max_patch_floats;
  std::vector<float> y(g.rows() * g.filters, -7);
  Conv2DForward(g, x.data(), k.data(), b.data(), ActivationKind::kLinear,
                y.data(), &ws);
  std::vector<float> want;
  NaiveConv(g, x, k, b, &want);
  ASSERT_EQ(y.size(), want.size());
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want[i], 1e-4) << i;

  std::vector<float> dy = RandomVector(y.size(), 4);
  std::vector<float> dk(k.size(), 5), db(cs.f, 5), dx(x.size(), 5);
  Conv2DBackward(g, x.data(), k.data(), dy.data(), dk.data(), db.data(),
                 dx.data(), &ws);
  std::vector<double> wdk, wdb, wdx;
  NaiveConvGrad(g, x, k, dy, &wdk, &wdb, &wdx);
  for (size_t i = 0; i < dk.size(); ++i) ASSERT_NEAR(dk[i], wdk[i], 1e-3) << i;
  for (size_t i = 0; i < db.size(); ++i) ASSERT_NEAR(db[i], wdb[i], 1e-3) << i;
  for (size_t i = 0; i < dx.size(); ++i) ASSERT_NEAR(dx[i], wdx[i], 1e-4) << i;

  // Without dx and bias (the first layer, use_bias = false): same kernel grad.
  std::vector<float> dk2(k.size(), 5);
  Conv2DBackward(g, x.data(), k.data(), dy.data(), dk2.data(), nullptr, nullptr,
                 &ws);
  EXPECT_EQ(dk, dk2);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ConvTest,
    ::testing::Combine(
        ::testing::Values(Case{2, 7, 6, 3, 3, 3, 4, 1, 1, false},
                          Case{2, 7, 6, 3, 3, 3, 4, 1, 1, true},
                          Case{3, 9, 8, 2, 3, 2, 5, 2, 2, true},
                          Case{3, 9, 8, 2, 3, 3, 5, 2, 2, false},
                          Case{1, 10, 10, 1, 4, 4, 3, 3, 2, true},
                          Case{2, 5, 5, 4, 1, 1, 3, 1, 1, false},
                          Case{2, 5, 5, 4, 1, 1, 3, 2, 2, true},
                          Case{1, 4, 4, 2, 5, 5, 2, 1, 1, true},
                          Case{0, 6, 6, 2, 3, 3, 4, 1, 1, true},
                          Case{1, 3, 3, 1, 3, 3, 1, 1, 1, false},
                          // Dilated taps (DeepLab's atrous convolutions).
                          Case{2, 9, 8, 3, 3, 3, 4, 1, 1, false, 2, 2},
                          Case{2, 9, 8, 3, 3, 3, 4, 1, 1, true, 2, 3},
                          Case{1, 11, 10, 2, 3, 2, 3, 2, 2, true, 3, 1},
                          Case{1, 8, 8, 1, 2, 2, 2, 1, 1, false, 1, 4}),
        ::testing::Values(1, 2),
        ::testing::Values(int64_t{1} << 23, int64_t{50})));

TEST(ConvGeometryTest, KerasOutputSizesAndPadding) {
  EXPECT_EQ(ConvOutputSize(28, 3, 1, false), 26);
  EXPECT_EQ(ConvOutputSize(28, 3, 2, false), 13);
  EXPECT_EQ(ConvOutputSize(28, 3, 2, true), 14);
  EXPECT_EQ(ConvOutputSize(7, 3, 2, true), 4);
  EXPECT_EQ(ConvOutputSize(2, 3, 1, false), 0);
  // same, in 6, k 3, stride 2: out 3, total pad (3-1)*2+3-6 = 1, before 0.
  EXPECT_EQ(ConvPadBefore(6, 3, 2, true), 0);
  // in 7, k 3, stride 2: out 4, total 2, before 1.
  EXPECT_EQ(ConvPadBefore(7, 3, 2, true), 1);
  EXPECT_EQ(ConvPadBefore(5, 4, 1, true), 1);  // total 3: 1 before, 2 after
  EXPECT_EQ(ConvPadBefore(5, 3, 1, false), 0);
  // Dilation 2 of a 3-tap kernel spans 5 cells: valid 9 -> 5, same pads 2.
  const Conv2DGeometry g =
      Conv2DGeometry::Make(1, 9, 9, 1, 3, 3, 1, 1, 1, false, 2, 2);
  EXPECT_EQ(g.out_h, 5);
  EXPECT_EQ(g.span_w(), 5);
  EXPECT_EQ(Conv2DGeometry::Make(1, 9, 9, 1, 3, 3, 1, 1, 1, true, 2, 2).pad_top,
            2);
}

TEST(FeatureMapLayoutTest, NhwcToNchwAndBack) {
  // 2 samples of 2x3 positions x 4 channels: x[s][p][c] = 100s + 10p + c.
  const int64_t n = 2, hw = 6, c = 4;
  std::vector<float> x(n * hw * c), y(x.size()), back(x.size());
  for (int64_t s = 0; s < n; ++s)
    for (int64_t p = 0; p < hw; ++p)
      for (int64_t ci = 0; ci < c; ++ci)
        x[(s * hw + p) * c + ci] = 100 * s + 10 * p + ci;
  NhwcToNchw(n, hw, c, x.data(), y.data());
  for (int64_t s = 0; s < n; ++s)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t p = 0; p < hw; ++p) {
        EXPECT_EQ(y[(s * c + ci) * hw + p], 100 * s + 10 * p + ci);
      }
  NchwToNhwc(n, hw, c, y.data(), back.data());
  EXPECT_EQ(back, x);
}

// The kernel layout permutations (torch [F, C, KH, KW] <-> Keras [KH, KW,
// C, F]) against the definition, over tile edges (sizes around 32) and a
// depthwise kernel (c = 1), on 1 and 3 threads; and back to the bytes.
TEST(ConvKernelLayoutTest, TorchToKerasAndBackAreTheDefinedPermutation) {
  struct Dims {
    int64_t f, c, kh, kw;
  };
  for (int threads : {1, 3}) {
    SetNumThreads(threads);
    for (const Dims& d :
         {Dims{6, 3, 3, 3}, Dims{33, 31, 3, 3}, Dims{64, 65, 1, 1},
          Dims{96, 1, 3, 3}, Dims{70, 40, 7, 7}, Dims{1, 1, 1, 1}}) {
      const int64_t n = d.f * d.c * d.kh * d.kw, taps = d.kh * d.kw;
      std::vector<float> torch(n);
      for (int64_t i = 0; i < n; ++i) torch[i] = static_cast<float>(i);
      std::vector<float> keras(n, -1.0f), back(n, -1.0f);
      TorchToKerasConvKernel(d.f, d.c, d.kh, d.kw, torch.data(), keras.data());
      for (int64_t fi = 0; fi < d.f; ++fi)
        for (int64_t ci = 0; ci < d.c; ++ci)
          for (int64_t t = 0; t < taps; ++t)
            ASSERT_EQ(keras[(t * d.c + ci) * d.f + fi],
                      torch[(fi * d.c + ci) * taps + t])
                << d.f << "x" << d.c << "x" << taps << " threads " << threads;
      KerasToTorchConvKernel(d.f, d.c, d.kh, d.kw, keras.data(), back.data());
      ASSERT_EQ(back, torch) << d.f << "x" << d.c << "x" << taps;
    }
  }
  SetNumThreads(1);
}

}  // namespace
}  // namespace lockstep
