// cuBLAS GEMM against the CPU GEMM (OpenBLAS) over every transpose, strided
// matrices, k == 0 and beta; FP32 to rounding, TF32 to its precision.
#include "kernels/cuda/gemm.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cuda/cuda_memory.h"
#include "kernels/cuda/cuda_test_util.h"

namespace lockstep {
namespace cuda {
namespace {

TEST(CublasHandleTest, WithoutGpuSaysWhy) {
  if (WhyNoDevice().empty()) GTEST_SKIP() << "a CUDA device is present";
  absl::StatusOr<CublasHandle> handle = CublasHandle::Create(nullptr);
  ASSERT_FALSE(handle.ok());
  EXPECT_EQ(handle.status().code(), absl::StatusCode::kFailedPrecondition)
      << handle.status();
  EXPECT_THAT(std::string(handle.status().message()),
              ::testing::StartsWith("cublasCreate(&handle) at "
                                    "kernels/cuda/gemm.cc:"));
}

struct Case {
  bool ta, tb;
  int64_t m, n, k;
  int64_t pad;  // extra elements per row of every matrix (strides)
  float beta;
  bool tf32;
};

class GemmTest : public ::testing::TestWithParam<Case> {};

TEST_P(GemmTest, MatchesCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const Case p = GetParam();
  const int64_t a_rows = p.ta ? p.k : p.m, a_cols = p.ta ? p.m : p.k;
  const int64_t b_rows = p.tb ? p.n : p.k, b_cols = p.tb ? p.k : p.n;
  const int64_t lda = a_cols + p.pad, ldb = b_cols + p.pad, ldc = p.n + p.pad;
  const std::vector<float> a = RandomVector(a_rows * lda, 51);
  const std::vector<float> b = RandomVector(b_rows * ldb, 52);
  const std::vector<float> c0 = RandomVector(p.m * ldc, 53);
  const float alpha = 0.75f;

  std::vector<float> want = c0;
  lockstep::Gemm(p.ta, p.tb, p.m, p.n, p.k, alpha, a.data(), lda, b.data(), ldb,
                 p.beta, want.data(), ldc);

  std::unique_ptr<CachingAllocator> scratch = NewDeviceAllocator(0);
  absl::StatusOr<CublasHandle> handle = CublasHandle::Create(scratch.get());
  ASSERT_TRUE(handle.ok()) << handle.status();
  DeviceArray<float> da(a), db(b), dc(c0);
  GemmOptions options;
  options.allow_tf32 = p.tf32;
  const absl::Status s =
      Gemm(*handle, nullptr, options, p.ta, p.tb, p.m, p.n, p.k, alpha,
           da.get(), lda, db.get(), ldb, p.beta, dc.get(), ldc);
  ASSERT_TRUE(s.ok()) << s;
  const std::vector<float> got = dc.ToHost();
  const double tol = p.tf32 ? 3e-3 * std::sqrt(p.k) + 1e-3 : 2e-6 * p.k + 1e-6;
  for (int64_t r = 0; r < p.m; ++r) {
    for (int64_t col = 0; col < ldc; ++col) {
      const int64_t i = r * ldc + col;
      if (col >= p.n) {
        ASSERT_EQ(got[i], c0[i]) << "padding written at " << r << "," << col;
      } else {
        ASSERT_NEAR(got[i], want[i], tol) << "at " << r << "," << col;
      }
    }
  }
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      cases.push_back({ta, tb, 17, 33, 65, 0, 0.0f, false});
      cases.push_back({ta, tb, 64, 10, 784, 3, 1.0f, false});
      cases.push_back({ta, tb, 128, 256, 300, 1, 0.5f, true});
    }
  }
  cases.push_back({false, false, 5, 7, 0, 2, 0.0f, false});  // k == 0
  cases.push_back({false, false, 5, 7, 0, 2, -2.0f, false});
  cases.push_back({false, true, 0, 7, 9, 0, 0.0f, false});  // m == 0
  cases.push_back({false, false, 1, 1, 1, 0, 0.0f, false});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmTest, ::testing::ValuesIn(Cases()));

// A job's 16-bit precisions: the product equals the float32 product of the
// inputs rounded to bfloat16 (the CPU's RoundToBf16) or half (through
// RoundInputs here) to float32 summation error, plain and strided-batched
// (a strided A, a stride-0 B), and is nowhere near that close to the unrounded
// float32 product: a large product, a tiny one (the operands are converted by
// lockstep, whatever kernel cuBLAS picks), and transposed operands with padded
// row strides (only the elements the strides reach are converted).
TEST(GemmPrecisionTest, SixteenBitInputsAreRoundedThenMultipliedExactly) {
  SKIP_WITHOUT_CUDA_DEVICE();
  struct Shape {
    int64_t m, n, k;
    bool trans_a, trans_b;
    int64_t pad;  // added to each row stride
  };
  std::unique_ptr<CachingAllocator> scratch = NewDeviceAllocator(0);
  absl::StatusOr<CublasHandle> handle = CublasHandle::Create(scratch.get());
  ASSERT_TRUE(handle.ok()) << handle.status();
  for (const Shape& sh :
       {Shape{48, 40, 320, false, false, 0}, Shape{16, 12, 4, false, false, 0},
        Shape{24, 40, 72, true, true, 5}}) {
    const int64_t m = sh.m, n = sh.n, k = sh.k;
    SCOPED_TRACE(testing::Message() << m << "x" << n << "x" << k);
    const int64_t a_rows = sh.trans_a ? k : m, a_cols = sh.trans_a ? m : k;
    const int64_t b_rows = sh.trans_b ? n : k, b_cols = sh.trans_b ? k : n;
    const int64_t lda = a_cols + sh.pad, ldb = b_cols + sh.pad;
    const std::vector<float> a = RandomVector(a_rows * lda, 61);
    const std::vector<float> b = RandomVector(b_rows * ldb, 62);
    for (InputRounding to : {InputRounding::kBf16, InputRounding::kFp16}) {
      SCOPED_TRACE(to == InputRounding::kBf16 ? "bf16" : "fp16");
      DeviceArray<float> da(a), db(b), ra(a.size()), rb(b.size());
      ASSERT_EQ(RoundInputs(to, a.size(), da.get(), ra.get(), nullptr),
                cudaSuccess);
      ASSERT_EQ(RoundInputs(to, b.size(), db.get(), rb.get(), nullptr),
                cudaSuccess);
      const std::vector<float> a16 = ra.ToHost(), b16 = rb.ToHost();
      if (to == InputRounding::kBf16) {
        std::vector<float> cpu(a.size());
        lockstep::RoundToBf16(a.size(), a.data(), cpu.data());
        ExpectSameBits(cpu, a16, "RoundInputs against RoundToBf16");
      }
      std::vector<float> want(m * n), exact(m * n);
      lockstep::Gemm(sh.trans_a, sh.trans_b, m, n, k, 1.0f, a16.data(), lda,
                     b16.data(), ldb, 0.0f, want.data(), n);
      lockstep::Gemm(sh.trans_a, sh.trans_b, m, n, k, 1.0f, a.data(), lda,
                     b.data(), ldb, 0.0f, exact.data(), n);
      GemmOptions options;
      options.inputs = to;
      DeviceArray<float> dc(m * n), dbatch(2 * m * n);
      ASSERT_TRUE(Gemm(*handle, nullptr, options, sh.trans_a, sh.trans_b, m, n,
                       k, 1.0f, da.get(), lda, db.get(), ldb, 0.0f, dc.get(), n)
                      .ok());
      // The same product twice in a batch: A twice in a row (stride: its
      // size), B once (stride 0).
      std::vector<float> a2(a);
      a2.insert(a2.end(), a.begin(), a.end());
      DeviceArray<float> da2(a2);
      ASSERT_TRUE(GemmStridedBatched(*handle, nullptr, options, sh.trans_a,
                                     sh.trans_b, m, n, k, 1.0f, da2.get(), lda,
                                     static_cast<int64_t>(a.size()), db.get(),
                                     ldb, 0, 0.0f, dbatch.get(), n, m * n, 2)
                      .ok());
      const std::vector<float> got = dc.ToHost(), batched = dbatch.ToHost();
      double off = 0, from_fp32 = 0;
      for (int64_t i = 0; i < m * n; ++i) {
        off = std::max({off, std::fabs(double{got[i]} - want[i]),
                        std::fabs(double{batched[i]} - want[i]),
                        std::fabs(double{batched[m * n + i]} - want[i])});
        from_fp32 = std::max(from_fp32, std::fabs(double{want[i]} - exact[i]));
      }
      EXPECT_LT(off, 2e-6 * k) << "16-bit rounding is " << from_fp32 << " off";
      EXPECT_GT(from_fp32, 20 * off);
      // Only copies were converted: the float32 inputs are as they were.
      ExpectSameBits(a, da.ToHost(), "A after the 16-bit GEMMs");
      ExpectSameBits(b, db.ToHost(), "B after the 16-bit GEMMs");
    }
  }
}

// The 16-bit operands' memory is a block of the handle's allocator: in use
// while the handle lives (grown, the old block cached for the stream),
// cached once it is gone; without an allocator a 16-bit GEMM says why and
// a float32 one still runs.
TEST(GemmPrecisionTest, SixteenBitScratchIsTheAllocatorsBlock) {
  SKIP_WITHOUT_CUDA_DEVICE();
  std::unique_ptr<CachingAllocator> scratch = NewDeviceAllocator(0);
  const int64_t m = 64, n = 32;
  DeviceArray<float> a(RandomVector(m * 512, 71)), b(RandomVector(512 * n, 72));
  DeviceArray<float> c(m * n);
  GemmOptions bf16;
  bf16.inputs = InputRounding::kBf16;
  {
    absl::StatusOr<CublasHandle> handle = CublasHandle::Create(scratch.get());
    ASSERT_TRUE(handle.ok()) << handle.status();
    ASSERT_TRUE(Gemm(*handle, nullptr, bf16, false, false, m, n, 8, 1.0f,
                     a.get(), 512, b.get(), n, 0.0f, c.get(), n)
                    .ok());
    const AllocatorStats small = scratch->stats();
    EXPECT_EQ(small.allocations, 1);
    EXPECT_GE(small.bytes_in_use, (m * 8 + 8 * n) * 2);
    // A larger product grows it: the first block back in the cache.
    ASSERT_TRUE(Gemm(*handle, nullptr, bf16, false, false, m, n, 512, 1.0f,
                     a.get(), 512, b.get(), n, 0.0f, c.get(), n)
                    .ok());
    const AllocatorStats grown = scratch->stats();
    EXPECT_EQ(grown.allocations, 2);
    EXPECT_GE(grown.bytes_in_use, (m * 512 + 512 * n) * 2);
    EXPECT_EQ(grown.bytes_cached, small.bytes_in_use);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  EXPECT_EQ(scratch->stats().bytes_in_use, 0);
  absl::StatusOr<CublasHandle> bare = CublasHandle::Create(nullptr);
  ASSERT_TRUE(bare.ok()) << bare.status();
  const absl::Status refused =
      Gemm(*bare, nullptr, bf16, false, false, m, n, 8, 1.0f, a.get(), 512,
           b.get(), n, 0.0f, c.get(), n);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(std::string(refused.message()),
              ::testing::HasSubstr("16-bit inputs need the cuBLAS handle's "
                                   "scratch allocator"));
  EXPECT_TRUE(Gemm(*bare, nullptr, GemmOptions(), false, false, m, n, 8, 1.0f,
                   a.get(), 512, b.get(), n, 0.0f, c.get(), n)
                  .ok());
}

}  // namespace
}  // namespace cuda
}  // namespace lockstep
