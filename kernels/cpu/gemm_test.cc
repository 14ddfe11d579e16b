#include "kernels/cpu/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/bf16_matmul.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

// C = alpha * op(A) op(B) + beta * C with plain loops.
void NaiveGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, const float* b, float beta, float* c) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) {
        const float av = ta ? a[p * m + i] : a[i * k + p];
        const float bv = tb ? b[j * k + p] : b[p * n + j];
        s += double{av} * bv;
      }
      c[i * n + j] =
          static_cast<float>(alpha * s + (beta == 0 ? 0 : beta * c[i * n + j]));
    }
  }
}

struct Case {
  int64_t m, n, k;
};

class GemmTest : public ::testing::TestWithParam<Case> {};

TEST_P(GemmTest, MatchesNaiveForAllTransposes) {
  const Case cs = GetParam();
  for (int threads : {1, 2, 3}) {
    SetNumThreads(threads);
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        for (float beta : {0.0f, 0.5f}) {
          std::vector<float> a = RandomVector(cs.m * cs.k, 1);
          std::vector<float> b = RandomVector(cs.k * cs.n, 2);
          std::vector<float> c = RandomVector(cs.m * cs.n, 3);
          std::vector<float> want = c;
          Gemm(ta, tb, cs.m, cs.n, cs.k, 1.5f, a.data(), b.data(), beta,
               c.data());
          NaiveGemm(ta, tb, cs.m, cs.n, cs.k, 1.5f, a.data(), b.data(), beta,
                    want.data());
          for (size_t i = 0; i < c.size(); ++i) {
            ASSERT_NEAR(c[i], want[i], 1e-4f * (1 + cs.k))
                << "ta=" << ta << " tb=" << tb << " beta=" << beta
                << " i=" << i;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, GemmTest,
                         ::testing::Values(Case{1, 1, 1}, Case{3, 5, 7},
                                           Case{17, 1, 33}, Case{64, 48, 129},
                                           Case{0, 4, 3}, Case{4, 0, 3},
                                           Case{5, 6, 0},
                                           // Big enough to split over
                                           // threads: by rows, by columns,
                                           // by depth.
                                           Case{400, 24, 70}, Case{24, 400, 70},
                                           Case{9, 32, 5000}));

TEST(GemmTest, StridedSubmatrix) {
  // A 2x3 block of a 4x5 matrix times a 3x2 block of a 3x4 matrix into a 2x2
  // block of a 2x6 matrix.
  std::vector<float> a = RandomVector(20, 4), b = RandomVector(12, 5);
  std::vector<float> c(12, 7.0f);
  Gemm(false, false, 2, 2, 3, 1.0f, a.data() + 1, 5, b.data() + 2, 4, 0.0f,
       c.data() + 3, 6);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      float s = 0;
      for (int p = 0; p < 3; ++p) s += a[1 + i * 5 + p] * b[2 + p * 4 + j];
      EXPECT_NEAR(c[3 + i * 6 + j], s, 1e-5f);
    }
  }
  EXPECT_EQ(c[0], 7.0f);
  EXPECT_EQ(c[5], 7.0f);
}

// The split paths on sub-matrices of wider buffers (lda, ldb, ldc larger
// than the row), and run twice: the same thread count gives the same bits.
TEST(GemmTest, SplitsHonourStridesAndRepeatExactly) {
  for (int threads : {2, 3}) {
    SetNumThreads(threads);
    for (const Case& cs :
         {Case{400, 24, 70}, Case{24, 400, 70}, Case{9, 32, 5000}}) {
      for (int ta = 0; ta < 2; ++ta) {
        for (int tb = 0; tb < 2; ++tb) {
          const int64_t pad = 3;
          const int64_t a_rows = ta ? cs.k : cs.m, a_cols = ta ? cs.m : cs.k;
          const int64_t b_rows = tb ? cs.n : cs.k, b_cols = tb ? cs.k : cs.n;
          const int64_t lda = a_cols + pad, ldb = b_cols + pad;
          const int64_t ldc = cs.n + pad;
          std::vector<float> a = RandomVector(a_rows * lda, 6);
          std::vector<float> b = RandomVector(b_rows * ldb, 7);
          std::vector<float> packed_a(a_rows * a_cols),
              packed_b(b_rows * b_cols);
          for (int64_t i = 0; i < a_rows; ++i) {
            for (int64_t j = 0; j < a_cols; ++j) {
              packed_a[i * a_cols + j] = a[i * lda + j];
            }
          }
          for (int64_t i = 0; i < b_rows; ++i) {
            for (int64_t j = 0; j < b_cols; ++j) {
              packed_b[i * b_cols + j] = b[i * ldb + j];
            }
          }
          std::vector<float> c(cs.m * ldc, 9.0f), again = c;
          std::vector<float> want(cs.m * cs.n);
          Gemm(ta, tb, cs.m, cs.n, cs.k, 1.0f, a.data(), lda, b.data(), ldb,
               0.0f, c.data(), ldc);
          Gemm(ta, tb, cs.m, cs.n, cs.k, 1.0f, a.data(), lda, b.data(), ldb,
               0.0f, again.data(), ldc);
          NaiveGemm(ta, tb, cs.m, cs.n, cs.k, 1.0f, packed_a.data(),
                    packed_b.data(), 0.0f, want.data());
          for (int64_t i = 0; i < cs.m; ++i) {
            for (int64_t j = 0; j < ldc; ++j) {
              const float got = c[i * ldc + j];
              ASSERT_EQ(got, again[i * ldc + j]) << i << "," << j;
              if (j >= cs.n) {
                ASSERT_EQ(got, 9.0f) << "wrote past the row: " << i;
              } else {
                ASSERT_NEAR(got, want[i * cs.n + j], 1e-4f * (1 + cs.k));
              }
            }
          }
        }
      }
    }
  }
}

// kBf16: every input rounded to bfloat16, products and sums in float32. On
// strided sub-matrices, all transposes, the split paths, beta 0 and 1:
// the float32 Gemm of the rounded matrices, bit for bit where the rounded
// values are multiplied by OpenBLAS (no bfloat16 instructions, or
// LOCKSTEP_BF16_GEMM=software: gemm_software_bf16_test), and within
// float32's summation-order error where oneDNN multiplies them; far nearer
// that than the float32 Gemm of the unrounded ones; the same bits twice.
TEST(GemmTest, Bf16IsTheFloat32GemmOfTheRoundedInputs) {
  std::printf("bf16 products here: %s\n", Bf16MatmulDescription().c_str());
  for (int threads : {1, 3}) {
    SetNumThreads(threads);
    for (const Case& cs :
         {Case{5, 7, 3}, Case{400, 24, 70}, Case{9, 32, 5000}}) {
      for (int ta = 0; ta < 2; ++ta) {
        for (int tb = 0; tb < 2; ++tb) {
          for (float beta : {0.0f, 1.0f}) {
            const int64_t pad = 2;
            const int64_t a_rows = ta ? cs.k : cs.m, a_cols = ta ? cs.m : cs.k;
            const int64_t b_rows = tb ? cs.n : cs.k, b_cols = tb ? cs.k : cs.n;
            const int64_t lda = a_cols + pad, ldb = b_cols + pad;
            const int64_t ldc = cs.n + pad;
            std::vector<float> a = RandomVector(a_rows * lda, 11);
            std::vector<float> b = RandomVector(b_rows * ldb, 12);
            std::vector<float> ra(a.size()), rb(b.size());
            RoundToBf16(a.size(), a.data(), ra.data());
            RoundToBf16(b.size(), b.data(), rb.data());
            std::vector<float> c(cs.m * ldc, 5.0f), again = c, want = c,
                                                    fp32 = c;
            for (std::vector<float>* out : {&c, &again}) {
              Gemm(GemmPrecision::kBf16, ta, tb, cs.m, cs.n, cs.k, 0.5f,
                   a.data(), lda, b.data(), ldb, beta, out->data(), ldc);
            }
            Gemm(ta, tb, cs.m, cs.n, cs.k, 0.5f, ra.data(), lda, rb.data(), ldb,
                 beta, want.data(), ldc);
            Gemm(GemmPrecision::kFp32, ta, tb, cs.m, cs.n, cs.k, 0.5f, a.data(),
                 lda, b.data(), ldb, beta, fp32.data(), ldc);
            const std::string what = std::to_string(cs.m) + "x" +
                                     std::to_string(cs.n) + "x" +
                                     std::to_string(cs.k);
            ASSERT_EQ(c, again) << what;
            if (!Bf16MatmulAvailable()) {
              ASSERT_EQ(c, want) << what;
            }
            double near = 0, far = 0;
            for (int64_t i = 0; i < cs.m; ++i) {
              ASSERT_EQ(c[i * ldc + cs.n], 5.0f) << "wrote past the row";
              for (int64_t j = 0; j < cs.n; ++j) {
                const float got = c[i * ldc + j];
                near =
                    std::max(near, double{std::fabs(got - want[i * ldc + j])});
                far = std::max(far, double{std::fabs(got - fp32[i * ldc + j])});
              }
            }
            ASSERT_LE(near, 1e-6 * cs.k) << what;
            ASSERT_GT(far, 10 * near) << what;
          }
        }
      }
    }
  }
  SetNumThreads(1);
}

// The rounding itself, on values chosen at bfloat16's grid (8 significant
// bits): 1 + 2^-9 rounds down to 1, so a 1x1x1 product of it with 1 is 1
// in bf16 and 1 + 2^-9 in float32.
TEST(GemmTest, Bf16RoundsEachInputToNearestEven) {
  const float a = 1.0f + 0x1p-9f, b = 1.0f;
  float c = 0.0f;
  Gemm(GemmPrecision::kBf16, false, false, 1, 1, 1, 1.0f, &a, &b, 0.0f, &c);
  EXPECT_EQ(c, 1.0f);
  Gemm(GemmPrecision::kFp32, false, false, 1, 1, 1, 1.0f, &a, &b, 0.0f, &c);
  EXPECT_EQ(c, a);
  // Products and sums stay float32: (1 + 2^-7)^2 = 1 + 2^-6 + 2^-14, exact.
  const float x[2] = {1.0f + 0x1p-7f, 1.0f + 0x1p-7f};
  Gemm(GemmPrecision::kBf16, false, false, 1, 1, 2, 1.0f, x, x, 0.0f, &c);
  EXPECT_EQ(c, 2.0f * (1.0f + 0x1p-6f + 0x1p-14f));
}

}  // namespace
}  // namespace lockstep
