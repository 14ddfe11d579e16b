#include "kernels/cpu/gemm.h"

#include <vector>

#include "gtest/gtest.h"
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
  for (int threads : {1, 2}) {
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
                                           Case{5, 6, 0}));

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

}  // namespace
}  // namespace lockstep
