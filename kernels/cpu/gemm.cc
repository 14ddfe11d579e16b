// cblas_sgemm with row-major conventions, the k == 0 edge handled here (BLAS
// implementations disagree on it), and the threading done by our ParallelFor
// pool: OpenBLAS stays single-threaded so that its own pthread pool and ours
// never spin against each other for the same cores.
#include "kernels/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernels/cpu/bf16_matmul.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

// Below this many multiply-adds per chunk a pool handoff costs more than the
// parallel work saves.
constexpr int64_t kMinMacsPerChunk = int64_t{1} << 18;
// Row/column splits come in multiples of this: OpenBLAS's sgemm micro-tile
// is 16 wide on AVX2/AVX-512, so only the last chunk has a ragged edge.
constexpr int64_t kTile = 16;
// A depth split leaves each chunk at least this much of k.
constexpr int64_t kMinDepth = 64;
// Elements per range when summing depth partials.
constexpr int64_t kSumGrain = int64_t{1} << 15;

void EnsureBlasSingleThreaded() {
  static const bool done = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)done;
}

void BlasGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
              float alpha, const float* a, int64_t lda, const float* b,
              int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0 || k <= 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(std::max<int64_t>(lda, 1)), b,
              static_cast<blasint>(std::max<int64_t>(ldb, 1)), beta, c,
              static_cast<blasint>(std::max<int64_t>(ldc, 1)));
}

// Start of chunk `i` of `chunks` over `units` units of `unit` elements; the
// last chunk runs to `size`.
int64_t ChunkStart(int64_t i, int64_t chunks, int64_t units, int64_t unit,
                   int64_t size) {
  return i == chunks ? size : std::min(size, unit * (units * i / chunks));
}

enum class Split { kRows, kCols, kDepth };

}  // namespace

namespace {

// C = alpha * op(A) op(B) + beta * C over elements T of A and B, split
// over the pool by rows, columns or depth; `block` multiplies one block
// (BlasGemm's arguments) on the calling thread.
template <typename T, typename Block>
void SplitGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
               float alpha, const T* a, int64_t lda, const T* b, int64_t ldb,
               float beta, float* c, int64_t ldc, const Block& block) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i) {
      float* row = c + i * ldc;
      if (beta == 0.0f) {
        std::fill(row, row + n, 0.0f);
      } else {
        for (int64_t j = 0; j < n; ++j) row[j] *= beta;
      }
    }
    return;
  }
  int64_t chunks =
      InsideParallelFor()
          ? 1
          : std::min<int64_t>(NumThreads(), m * n * k / kMinMacsPerChunk);
  // Pick the split that duplicates the least work: a row split makes every
  // chunk pack all of op(B) (k*n), a column split all of op(A) (m*k), a depth
  // split writes and re-reads one partial C per extra chunk (2*m*n).
  const int64_t row_units = (m + kTile - 1) / kTile;
  const int64_t col_units = (n + kTile - 1) / kTile;
  const int64_t depth_units = k / kMinDepth;
  Split split = Split::kRows;
  int64_t units = 0, best_cost = 0;
  auto consider = [&](Split s, int64_t u, int64_t cost) {
    if (u >= 2 && (units == 0 || cost < best_cost)) {
      split = s, units = u, best_cost = cost;
    }
  };
  consider(Split::kRows, row_units, k * n);
  consider(Split::kCols, col_units, m * k);
  consider(Split::kDepth, depth_units, 2 * m * n);
  chunks = std::min(chunks, units);
  if (chunks <= 1) {
    block(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // Partial products of depth chunks 1.. (chunk 0 accumulates into C). The
  // caller's thread owns the buffer; pool threads write their own slices
  // through `part` (naming `partials` there would be their own copy).
  thread_local std::vector<float> partials;
  if (split == Split::kDepth &&
      partials.size() < static_cast<size_t>((chunks - 1) * m * n)) {
    partials.resize((chunks - 1) * m * n);
  }
  float* const part = partials.data();
  // One range item is one chunk, so the chunk boundaries (and so the result)
  // depend only on the shape and the thread count, even when ParallelFor
  // runs the whole range inline.
  ParallelFor(chunks, 1, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      switch (split) {
        case Split::kRows: {
          const int64_t r0 = ChunkStart(i, chunks, units, kTile, m);
          const int64_t r1 = ChunkStart(i + 1, chunks, units, kTile, m);
          block(trans_a, trans_b, r1 - r0, n, k, alpha,
                trans_a ? a + r0 : a + r0 * lda, lda, b, ldb, beta,
                c + r0 * ldc, ldc);
          break;
        }
        case Split::kCols: {
          const int64_t c0 = ChunkStart(i, chunks, units, kTile, n);
          const int64_t c1 = ChunkStart(i + 1, chunks, units, kTile, n);
          block(trans_a, trans_b, m, c1 - c0, k, alpha, a, lda,
                trans_b ? b + c0 * ldb : b + c0, ldb, beta, c + c0, ldc);
          break;
        }
        case Split::kDepth: {
          const int64_t k0 = ChunkStart(i, chunks, units, kMinDepth, k);
          const int64_t k1 = ChunkStart(i + 1, chunks, units, kMinDepth, k);
          const T* ak = trans_a ? a + k0 * lda : a + k0;
          const T* bk = trans_b ? b + k0 : b + k0 * ldb;
          if (i == 0) {
            block(trans_a, trans_b, m, n, k1 - k0, alpha, ak, lda, bk, ldb,
                  beta, c, ldc);
          } else {
            block(trans_a, trans_b, m, n, k1 - k0, alpha, ak, lda, bk, ldb,
                  0.0f, part + (i - 1) * m * n, n);
          }
          break;
        }
      }
    }
  });
  if (split != Split::kDepth) return;
  // C += partial 1 + partial 2 + ..., in that order for every element.
  ParallelFor(m, std::max<int64_t>(1, kSumGrain / n),
              [&](int64_t first, int64_t last) {
                for (int64_t r = first; r < last; ++r) {
                  float* __restrict row = c + r * ldc;
                  for (int64_t p = 0; p + 1 < chunks; ++p) {
                    const float* __restrict src = part + (p * m + r) * n;
                    for (int64_t j = 0; j < n; ++j) row[j] += src[j];
                  }
                }
              });
}

}  // namespace

void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
          float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
          float beta, float* c, int64_t ldc) {
  EnsureBlasSingleThreaded();
  SplitGemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
            BlasGemm);
}

void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
          float alpha, const float* a, const float* b, float beta, float* c) {
  Gemm(trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b, trans_b ? k : n,
       beta, c, n);
}

namespace {

// `rows` rows of `cols` floats at stride `ld`, rounded to bfloat16 into
// `out` (packed: stride `cols`): as floats (T = float, RoundToBf16) or as
// bfloat16 bits (T = uint16_t, FloatToBf16).
template <typename T>
void RoundRows(int64_t rows, int64_t cols, const float* x, int64_t ld,
               std::vector<T>& out) {
  if (out.size() < static_cast<size_t>(rows * cols)) out.resize(rows * cols);
  T* const dst = out.data();
  ParallelFor(rows,
              std::max<int64_t>(1, kSumGrain / std::max<int64_t>(cols, 1)),
              [&](int64_t first, int64_t last) {
                for (int64_t r = first; r < last; ++r) {
                  if constexpr (std::is_same_v<T, float>) {
                    RoundToBf16(cols, x + r * ld, dst + r * cols);
                  } else {
                    FloatToBf16(cols, x + r * ld, dst + r * cols);
                  }
                }
              });
}

// `rows` rows of `cols` bfloat16 values at stride `ld`, widened into `out`
// (packed).
void WidenRows(int64_t rows, int64_t cols, const uint16_t* x, int64_t ld,
               std::vector<float>& out) {
  out.resize(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    Bf16BytesToFloat(cols, reinterpret_cast<const char*>(x + r * ld),
                     out.data() + r * cols);
  }
}

// One block of a bf16 product in oneDNN; should oneDNN refuse it (it did
// not at the probe), the same block's values multiplied in float32.
void Bf16Block(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
               float alpha, const uint16_t* a, int64_t lda, const uint16_t* b,
               int64_t ldb, float beta, float* c, int64_t ldc) {
  if (Bf16Matmul(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                 ldc)) {
    return;
  }
  thread_local std::vector<float> wide_a, wide_b;
  const int64_t a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
  const int64_t b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
  WidenRows(a_rows, a_cols, a, lda, wide_a);
  WidenRows(b_rows, b_cols, b, ldb, wide_b);
  BlasGemm(trans_a, trans_b, m, n, k, alpha, wide_a.data(), a_cols,
           wide_b.data(), b_cols, beta, c, ldc);
}

}  // namespace

void Gemm(GemmPrecision precision, bool trans_a, bool trans_b, int64_t m,
          int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (precision == GemmPrecision::kFp32 || m <= 0 || n <= 0 || k <= 0) {
    Gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // The stored matrices, rounded: A is k x m when trans_a, else m x k; B
  // is n x k when trans_b, else k x n. The caller's thread owns the
  // buffers until Gemm returns. oneDNN's blocks give other bits than
  // OpenBLAS's (another order of the float32 sums), the same on every
  // machine that takes the same path.
  const int64_t a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
  const int64_t b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
  EnsureBlasSingleThreaded();
  if (Bf16MatmulAvailable()) {
    thread_local std::vector<uint16_t> bits_a, bits_b;
    RoundRows(a_rows, a_cols, a, lda, bits_a);
    RoundRows(b_rows, b_cols, b, ldb, bits_b);
    SplitGemm(trans_a, trans_b, m, n, k, alpha, bits_a.data(), a_cols,
              bits_b.data(), b_cols, beta, c, ldc, Bf16Block);
    return;
  }
  thread_local std::vector<float> rounded_a, rounded_b;
  RoundRows(a_rows, a_cols, a, lda, rounded_a);
  RoundRows(b_rows, b_cols, b, ldb, rounded_b);
  Gemm(trans_a, trans_b, m, n, k, alpha, rounded_a.data(), a_cols,
       rounded_b.data(), b_cols, beta, c, ldc);
}

void Gemm(GemmPrecision precision, bool trans_a, bool trans_b, int64_t m,
          int64_t n, int64_t k, float alpha, const float* a, const float* b,
          float beta, float* c) {
  Gemm(precision, trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b,
       trans_b ? k : n, beta, c, n);
}

}  // namespace lockstep
