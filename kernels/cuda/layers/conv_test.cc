// CudnnConv2D against kernels/cpu/conv.h over valid/same padding (symmetric
// and TF's asymmetric), strides 1 and 2, odd and rectangular sizes, batches
// 0, 1 and more. Tolerance: max |gpu - cpu| <= 1e-4 * max(1, max |cpu|) per
// output; both sides are FP32 (no TF32) with different summation orders, and
// the longest sums here (dkernel over N*OH*OW <= 450 terms) stay far below.
#include "kernels/cuda/layers/conv.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cuda/cuda_test_util.h"
#include "kernels/cuda/layers/conv_transform.h"

namespace lockstep {
namespace cuda {
namespace {

struct Case {
  int64_t batch, h, w, c, kh, kw, f, sh, sw;
  bool same;
};

void ExpectClose(const std::vector<float>& want, const std::vector<float>& got,
                 const char* what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  float max_abs = 1.0f;
  for (float v : want) max_abs = std::max(max_abs, std::fabs(v));
  const float tol = 1e-4f * max_abs;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(want[i], got[i], tol) << what << " at " << i;
  }
}

class ConvTest : public ::testing::TestWithParam<Case> {};

TEST_P(ConvTest, ForwardAndBackwardMatchCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const Case k = GetParam();
  const Conv2DGeometry g = Conv2DGeometry::Make(k.batch, k.h, k.w, k.c, k.kh,
                                                k.kw, k.f, k.sh, k.sw, k.same);
  const std::vector<float> x = RandomVector(k.batch * k.h * k.w * k.c, 1);
  const std::vector<float> kernel = RandomVector(g.patch_size() * k.f, 2);
  const std::vector<float> bias = RandomVector(k.f, 3);
  const std::vector<float> dy = RandomVector(g.rows() * k.f, 4);

  absl::StatusOr<CudnnHandle> handle = CudnnHandle::Create();
  ASSERT_TRUE(handle.ok()) << handle.status();
  absl::StatusOr<CudnnConv2D> conv = CudnnConv2D::Create(*handle, g);
  ASSERT_TRUE(conv.ok()) << conv.status();
  DeviceArray<char> ws(std::max<size_t>(conv->workspace_bytes(), 1));
  DeviceArray<float> xd(x), kd(kernel), bd(bias), dyd(dy);

  for (ActivationKind act : {ActivationKind::kLinear, ActivationKind::kRelu}) {
    SCOPED_TRACE(static_cast<int>(act));
    const bool with_bias = act == ActivationKind::kRelu;
    std::vector<float> want(g.rows() * k.f);
    ConvWorkspace cpu_ws;
    Conv2DForward(g, x.data(), kernel.data(), with_bias ? bias.data() : nullptr,
                  act, want.data(), &cpu_ws);
    DeviceArray<float> y(want.size());
    ASSERT_TRUE(conv->Forward(*handle, nullptr, xd.get(), kd.get(),
                              with_bias ? bd.get() : nullptr, act, y.get(),
                              ws.get())
                    .ok());
    ExpectClose(want, y.ToHost(), "y");
  }

  std::vector<float> want_dk(kernel.size(), -1.0f), want_db(k.f, -1.0f);
  std::vector<float> want_dx(x.size(), -1.0f);
  ConvWorkspace cpu_ws;
  std::vector<float> y(g.rows() * k.f);
  Conv2DForward(g, x.data(), kernel.data(), nullptr, ActivationKind::kLinear,
                y.data(), &cpu_ws);
  Conv2DBackward(g, x.data(), kernel.data(), dy.data(), want_dk.data(),
                 want_db.data(), want_dx.data(), &cpu_ws);
  DeviceArray<float> dk(std::vector<float>(kernel.size(), -1.0f));
  DeviceArray<float> db(std::vector<float>(k.f, -1.0f));
  DeviceArray<float> dx(std::vector<float>(x.size(), -1.0f));
  const absl::Status s =
      conv->Backward(*handle, nullptr, xd.get(), kd.get(), dyd.get(), dk.get(),
                     db.get(), dx.get(), ws.get());
  ASSERT_TRUE(s.ok()) << s;
  ExpectClose(want_dk, dk.ToHost(), "dkernel");
  ExpectClose(want_db, db.ToHost(), "dbias");
  ExpectClose(want_dx, dx.ToHost(), "dx");
  // dy must be untouched (the caller may reuse it).
  EXPECT_EQ(dyd.ToHost(), dy);
}

// A job's 16-bit precisions: the convolutions equal the CPU's float32 ones
// on x, the kernel and dy rounded to bfloat16 or half (RoundInputs, which
// the kernels' tests hold to the CPU's rounding) to the same tolerance, the
// products on tensor cores being exact; the bias gradient sums dy as it is.
TEST_P(ConvTest, SixteenBitInputsAreRoundedThenConvolvedExactly) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const Case k = GetParam();
  const Conv2DGeometry g = Conv2DGeometry::Make(k.batch, k.h, k.w, k.c, k.kh,
                                                k.kw, k.f, k.sh, k.sw, k.same);
  const std::vector<float> x = RandomVector(k.batch * k.h * k.w * k.c, 11);
  const std::vector<float> kernel = RandomVector(g.patch_size() * k.f, 12);
  const std::vector<float> dy = RandomVector(g.rows() * k.f, 14);
  absl::StatusOr<CudnnHandle> handle = CudnnHandle::Create();
  ASSERT_TRUE(handle.ok()) << handle.status();
  for (InputRounding to : {InputRounding::kBf16, InputRounding::kFp16}) {
    SCOPED_TRACE(to == InputRounding::kBf16 ? "bf16" : "fp16");
    auto rounded = [&](const std::vector<float>& v) {
      DeviceArray<float> d(v);
      EXPECT_EQ(RoundInputs(to, v.size(), d.get(), d.get(), nullptr),
                cudaSuccess);
      return d.ToHost();
    };
    const std::vector<float> x16 = rounded(x), k16 = rounded(kernel),
                             dy16 = rounded(dy);
    ConvOptions options;
    options.inputs = to;
    absl::StatusOr<CudnnConv2D> conv = CudnnConv2D::Create(*handle, g, options);
    ASSERT_TRUE(conv.ok()) << conv.status();
    DeviceArray<char> ws(std::max<size_t>(conv->workspace_bytes(), 1));
    DeviceArray<float> xd(x), kd(kernel), dyd(dy);

    ConvWorkspace cpu_ws;
    std::vector<float> want(g.rows() * k.f);
    Conv2DForward(g, x16.data(), k16.data(), nullptr, ActivationKind::kLinear,
                  want.data(), &cpu_ws);
    DeviceArray<float> y(want.size());
    ASSERT_TRUE(conv->Forward(*handle, nullptr, xd.get(), kd.get(), nullptr,
                              ActivationKind::kLinear, y.get(), ws.get())
                    .ok());
    ExpectClose(want, y.ToHost(), "y");

    std::vector<float> want_dk(kernel.size()), want_db(k.f), want_dx(x.size());
    std::vector<float> unused_dk(kernel.size()), unused_dx(x.size());
    Conv2DBackward(g, x16.data(), k16.data(), dy16.data(), want_dk.data(),
                   nullptr, want_dx.data(), &cpu_ws);
    ConvWorkspace bias_ws;
    std::vector<float> y32(g.rows() * k.f);
    Conv2DForward(g, x.data(), kernel.data(), nullptr, ActivationKind::kLinear,
                  y32.data(), &bias_ws);
    Conv2DBackward(g, x.data(), kernel.data(), dy.data(), unused_dk.data(),
                   want_db.data(), unused_dx.data(), &bias_ws);
    DeviceArray<float> dk(kernel.size()), db(k.f), dx(x.size());
    const absl::Status s =
        conv->Backward(*handle, nullptr, xd.get(), kd.get(), dyd.get(),
                       dk.get(), db.get(), dx.get(), ws.get());
    ASSERT_TRUE(s.ok()) << s;
    ExpectClose(want_dk, dk.ToHost(), "dkernel");
    ExpectClose(want_db, db.ToHost(), "dbias");
    ExpectClose(want_dx, dx.ToHost(), "dx");
    EXPECT_EQ(dyd.ToHost(), dy);  // rounded in the workspace, not in place
    EXPECT_EQ(xd.ToHost(), x);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Geometries, ConvTest,
    ::testing::Values(
        // batch, h, w, c, kh, kw, f, sh, sw, same
        Case{2, 7, 9, 3, 3, 3, 4, 1, 1, false},    // valid, odd sizes
        Case{2, 6, 5, 2, 3, 3, 3, 1, 1, true},     // same, symmetric
        Case{3, 8, 8, 3, 3, 3, 5, 2, 2, true},     // same, pad 0/1 (explicit)
        Case{1, 7, 7, 2, 2, 2, 3, 2, 2, true},     // even kernel, pad 0/1
        Case{2, 5, 6, 2, 2, 2, 2, 1, 1, true},     // stride 1, pad 0/1
        Case{2, 9, 9, 1, 3, 3, 4, 2, 2, true},     // stride 2, pad 1/1
        Case{2, 28, 28, 1, 3, 3, 8, 2, 2, true},   // MNIST-sized, pad 0/1
        Case{1, 5, 5, 3, 1, 1, 4, 2, 2, true},     // 1x1, stride 2
        Case{2, 6, 9, 2, 2, 3, 3, 1, 2, false},    // rectangular, strides 1x2
        Case{1, 10, 8, 3, 3, 5, 2, 2, 1, true},    // rectangular 'same'
        Case{0, 7, 7, 3, 3, 3, 4, 1, 1, true},     // empty batch
        Case{1, 3, 3, 2, 3, 3, 2, 1, 1, false}));  // one output pixel

// PyTorch's kernel layout to Keras' and back, as the CPU's helpers.
TEST(ConvKernelLayoutTest, TorchAndKerasLayoutsMatchCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (const auto& [f, c, kh, kw] : std::vector<std::array<int64_t, 4>>{
           {8, 3, 3, 3}, {96, 1, 3, 3}, {5, 7, 1, 1}, {4, 2, 3, 2}}) {
    const std::vector<float> torch = RandomVector(f * c * kh * kw, 41);
    std::vector<float> keras(torch.size()), back(torch.size());
    lockstep::TorchToKerasConvKernel(f, c, kh, kw, torch.data(), keras.data());
    lockstep::KerasToTorchConvKernel(f, c, kh, kw, keras.data(), back.data());
    ASSERT_EQ(back, torch);
    DeviceArray<float> d_torch(torch), d_keras(torch.size()),
        d_back(torch.size());
    ASSERT_EQ(TorchToKerasConvKernel(f, c, kh * kw, d_torch.get(),
                                     d_keras.get(), nullptr),
              cudaSuccess);
    ASSERT_EQ(KerasToTorchConvKernel(f, c, kh * kw, d_keras.get(), d_back.get(),
                                     nullptr),
              cudaSuccess);
    EXPECT_EQ(d_keras.ToHost(), keras);
    EXPECT_EQ(d_back.ToHost(), torch);
  }
}

// Feature maps NHWC to NCHW and back (flatten under torch naming), as the
// CPU's helpers.
TEST(FeatureMapLayoutTest, NhwcToNchwAndBackMatchCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (const auto& [n, hw, c] : std::vector<std::array<int64_t, 3>>{
           {2, 6, 4}, {3, 49, 64}, {1, 1, 8}, {0, 4, 4}}) {
    const std::vector<float> x = RandomVector(n * hw * c, 43);
    std::vector<float> nchw(x.size()), back(x.size());
    lockstep::NhwcToNchw(n, hw, c, x.data(), nchw.data());
    lockstep::NchwToNhwc(n, hw, c, nchw.data(), back.data());
    ASSERT_EQ(back, x);
    DeviceArray<float> d_x(x), d_nchw(x.size()), d_back(x.size());
    ASSERT_EQ(NhwcToNchw(n, hw, c, d_x.get(), d_nchw.get(), nullptr),
              cudaSuccess);
    ASSERT_EQ(NchwToNhwc(n, hw, c, d_nchw.get(), d_back.get(), nullptr),
              cudaSuccess);
    EXPECT_EQ(d_nchw.ToHost(), nchw);
    EXPECT_EQ(d_back.ToHost(), x);
  }
}

// Checked before cuDNN is touched, so this runs without a device too.
TEST(CudnnConv2DTest, GroupsThatDoNotDivideAreRefused) {
  const Conv2DGeometry g =
      Conv2DGeometry::Make(1, 5, 5, 6, 3, 3, 4, 1, 1, true);
  const CudnnHandle none;
  absl::StatusOr<CudnnConv2D> conv = CudnnConv2D::Create(none, g, {}, 4);
  ASSERT_FALSE(conv.ok());
  EXPECT_EQ(conv.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(conv.status().message(),
            "CudnnConv2D: groups 4 must divide the 6 input channels and the 4 "
            "filters");
}

TEST(CudnnHandleTest, CreateWithoutDeviceFailsCleanly) {
  if (WhyNoDevice().empty()) GTEST_SKIP() << "a GPU is present";
  absl::StatusOr<CudnnHandle> handle = CudnnHandle::Create();
  EXPECT_FALSE(handle.ok());
}

}  // namespace
}  // namespace cuda
}  // namespace lockstep
