// Element-wise loops written so the compiler vectorizes the inner dimension.
#include "kernels/cpu/elementwise.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/bf16_bits.h"
#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

// Elements per ParallelFor range: below this the wake-up costs more than the
// work. Transcendental activations are ~10x dearer per element.
constexpr int64_t kCheapGrain = 1 << 15;
constexpr int64_t kDearGrain = 1 << 12;
// BiasGrad sums fixed blocks of rows, then the blocks in order, so the result
// does not depend on the thread count.
constexpr int64_t kBiasGradRowBlock = 256;

int64_t RowGrain(int64_t cols, int64_t grain) {
  return std::max<int64_t>(1, grain / std::max<int64_t>(cols, 1));
}

inline float Sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

LOCKSTEP_VECTOR_CLONES void SoftmaxRow(int64_t cols, const float* x,
                                       float* y) {
  float m = x[0];
  for (int64_t c = 1; c < cols; ++c) m = std::max(m, x[c]);
  for (int64_t c = 0; c < cols; ++c) y[c] = ExpNonPositive(x[c] - m);
  const float inv = 1.0f / SumLanes(cols, y);
  for (int64_t c = 0; c < cols; ++c) y[c] *= inv;
}

// dy = d/d(pre-activation) from the activation's output y, for `rows` rows.
void ActivationBackwardRows(int64_t rows, int64_t cols, ActivationKind act,
                            const float* __restrict y, float* __restrict d) {
  const int64_t n = rows * cols;
  switch (act) {
    case ActivationKind::kRelu:
      for (int64_t i = 0; i < n; ++i) d[i] = y[i] > 0.0f ? d[i] : 0.0f;
      break;
    case ActivationKind::kRelu6:
      for (int64_t i = 0; i < n; ++i) {
        d[i] = y[i] > 0.0f && y[i] < 6.0f ? d[i] : 0.0f;
      }
      break;
    case ActivationKind::kTanh:
      for (int64_t i = 0; i < n; ++i) d[i] *= 1.0f - y[i] * y[i];
      break;
    case ActivationKind::kSigmoid:
      for (int64_t i = 0; i < n; ++i) d[i] *= y[i] * (1.0f - y[i]);
      break;
    case ActivationKind::kSoftmax:
      // dz = y * (dy - <dy, y>) per row.
      for (int64_t r = 0; r < rows; ++r) {
        const float* yy = y + r * cols;
        float* dd = d + r * cols;
        float dot = 0.0f;
        for (int64_t c = 0; c < cols; ++c) dot += dd[c] * yy[c];
        for (int64_t c = 0; c < cols; ++c) dd[c] = yy[c] * (dd[c] - dot);
      }
      break;
    case ActivationKind::kLinear:
      break;
  }
}

}  // namespace

void AddBias(int64_t rows, int64_t cols, const float* bias, float* y) {
  ParallelFor(rows, RowGrain(cols, kCheapGrain), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float* row = y + r * cols;
      for (int64_t c = 0; c < cols; ++c) row[c] += bias[c];
    }
  });
}

void BiasGrad(int64_t rows, int64_t cols, const float* dy, float* dbias) {
  ActivationBackwardBiasGrad(rows, cols, ActivationKind::kLinear, nullptr,
                             const_cast<float*>(dy), dbias);
}

void BiasActivationForward(int64_t rows, int64_t cols, const float* bias,
                           ActivationKind act, float* y) {
  if (act == ActivationKind::kLinear) {
    if (bias != nullptr) AddBias(rows, cols, bias, y);
    return;
  }
  const bool dear =
      act != ActivationKind::kRelu && act != ActivationKind::kRelu6;
  ParallelFor(rows, RowGrain(cols, dear ? kDearGrain : kCheapGrain),
              [&](int64_t b, int64_t e) {
                for (int64_t r = b; r < e; ++r) {
                  float* row = y + r * cols;
                  if (bias != nullptr) {
                    for (int64_t c = 0; c < cols; ++c) row[c] += bias[c];
                  }
                  switch (act) {
                    case ActivationKind::kRelu:
                      for (int64_t c = 0; c < cols; ++c) {
                        row[c] = std::max(row[c], 0.0f);
                      }
                      break;
                    case ActivationKind::kRelu6:
                      for (int64_t c = 0; c < cols; ++c) {
                        row[c] = std::min(std::max(row[c], 0.0f), 6.0f);
                      }
                      break;
                    case ActivationKind::kTanh:
                      for (int64_t c = 0; c < cols; ++c) {
                        row[c] = std::tanh(row[c]);
                      }
                      break;
                    case ActivationKind::kSigmoid:
                      for (int64_t c = 0; c < cols; ++c) {
                        row[c] = Sigmoid(row[c]);
                      }
                      break;
                    case ActivationKind::kSoftmax:
                      SoftmaxRow(cols, row, row);
                      break;
                    case ActivationKind::kLinear:
                      break;
                  }
                }
              });
}

void ActivationBackward(int64_t rows, int64_t cols, ActivationKind act,
                        const float* y, float* dy) {
  if (act == ActivationKind::kLinear) return;
  ParallelFor(rows, RowGrain(cols, kCheapGrain), [&](int64_t b, int64_t e) {
    ActivationBackwardRows(e - b, cols, act, y + b * cols, dy + b * cols);
  });
}

void ActivationBackwardBiasGrad(int64_t rows, int64_t cols, ActivationKind act,
                                const float* y, float* dy, float* dbias) {
  if (dbias == nullptr) {
    ActivationBackward(rows, cols, act, y, dy);
    return;
  }
  std::fill(dbias, dbias + cols, 0.0f);
  if (rows <= 0 || cols <= 0) return;
  // Fixed blocks of rows, each summed on its own, then the blocks in order:
  // the result does not depend on the thread count.
  const int64_t blocks = (rows + kBiasGradRowBlock - 1) / kBiasGradRowBlock;
  thread_local std::vector<float> partial;
  if (partial.size() < static_cast<size_t>(blocks * cols)) {
    partial.resize(blocks * cols);
  }
  float* part = partial.data();
  ParallelFor(blocks, RowGrain(cols * kBiasGradRowBlock, kCheapGrain),
              [&](int64_t b, int64_t e) {
                for (int64_t k = b; k < e; ++k) {
                  const int64_t r0 = k * kBiasGradRowBlock;
                  const int64_t r1 = std::min(rows, r0 + kBiasGradRowBlock);
                  if (act != ActivationKind::kLinear) {
                    ActivationBackwardRows(r1 - r0, cols, act, y + r0 * cols,
                                           dy + r0 * cols);
                  }
                  float* __restrict acc = part + k * cols;
                  std::fill(acc, acc + cols, 0.0f);
                  for (int64_t r = r0; r < r1; ++r) {
                    const float* __restrict row = dy + r * cols;
                    for (int64_t c = 0; c < cols; ++c) acc[c] += row[c];
                  }
                }
              });
  for (int64_t k = 0; k < blocks; ++k) {
    const float* acc = part + k * cols;
    for (int64_t c = 0; c < cols; ++c) dbias[c] += acc[c];
  }
}

void SoftmaxRows(int64_t rows, int64_t cols, const float* x, float* y) {
  if (cols <= 0) return;
  ParallelFor(rows, RowGrain(cols, kDearGrain), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      SoftmaxRow(cols, x + r * cols, y + r * cols);
  });
}

LOCKSTEP_VECTOR_CLONES void MaskedSoftmaxRow(int64_t cols,
                                             const float* key_mask,
                                             float* row) {
  if (key_mask == nullptr) {
    SoftmaxRow(cols, row, row);
    return;
  }
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  float lanes[8] = {kNone, kNone, kNone, kNone, kNone, kNone, kNone, kNone};
  int64_t c = 0;  // 8 lanes: a single running max does not vectorize
  for (; c + 8 <= cols; c += 8) {
    for (int k = 0; k < 8; ++k) {
      const float v = key_mask[c + k] != 0.0f ? row[c + k] : kNone;
      lanes[k] = lanes[k] > v ? lanes[k] : v;
    }
  }
  for (; c < cols; ++c) {
    const float v = key_mask[c] != 0.0f ? row[c] : kNone;
    lanes[0] = lanes[0] > v ? lanes[0] : v;
  }
  const float m = *std::max_element(lanes, lanes + 8);
  if (m == kNone) {  // every key padded
    std::fill(row, row + cols, 0.0f);
    return;
  }
  for (int64_t c = 0; c < cols; ++c) {
    const float e = ExpNonPositive(row[c] - m);
    row[c] = key_mask[c] != 0.0f ? e : 0.0f;
  }
  const float inv = 1.0f / SumLanes(cols, row);
  for (int64_t c = 0; c < cols; ++c) row[c] *= inv;
}

LOCKSTEP_VECTOR_CLONES void SoftmaxBackwardRow(int64_t cols, const float* p,
                                               float scale, float* g) {
  const float dot = DotLanes(cols, g, p);
  for (int64_t c = 0; c < cols; ++c) g[c] = p[c] * (g[c] - dot) * scale;
}

LOCKSTEP_VECTOR_CLONES void LayerNormRow(int64_t w, const float* x,
                                         const float* gamma, const float* beta,
                                         float epsilon, float* y, float* mean,
                                         float* rstd) {
  const float inv_w = 1.0f / static_cast<float>(w);
  const float m = SumLanes(w, x) * inv_w;
  for (int64_t c = 0; c < w; ++c) y[c] = x[c] - m;  // centred, in y
  const float r = 1.0f / std::sqrt(DotLanes(w, y, y) * inv_w + epsilon);
  for (int64_t c = 0; c < w; ++c) y[c] = y[c] * r * gamma[c] + beta[c];
  *mean = m;
  *rstd = r;
}

void Scale(int64_t n, float alpha, float* x) {
  ParallelFor(n, kCheapGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) x[i] *= alpha;
  });
}

void Axpy(int64_t n, float alpha, const float* x, float* y) {
  ParallelFor(n, kCheapGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] += alpha * x[i];
  });
}

LOCKSTEP_VECTOR_CLONES void AddFromBytes(int64_t n, const char* x, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, x + i * sizeof(float), sizeof(float));
    y[i] = v + y[i];
  }
}

namespace {
inline float Bf16At(const char* x, int64_t i) {
  uint16_t h;
  std::memcpy(&h, x + i * sizeof(uint16_t), sizeof(h));
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}
}  // namespace

namespace {
// x's bfloat16 (kernels/cpu/bf16_bits.h, the GPU's rounding too).
inline uint16_t Bf16Bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return Bf16FromFloatBits(bits);
}
}  // namespace

LOCKSTEP_VECTOR_CLONES void FloatToBf16(int64_t n, const float* x,
                                        uint16_t* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = Bf16Bits(x[i]);
}

LOCKSTEP_VECTOR_CLONES void RoundToBf16(int64_t n, const float* x, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(Bf16Bits(x[i])) << 16;
    std::memcpy(y + i, &bits, sizeof(bits));
  }
}

LOCKSTEP_VECTOR_CLONES void Bf16BytesToFloat(int64_t n, const char* x,
                                             float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = Bf16At(x, i);
}

LOCKSTEP_VECTOR_CLONES void AddBf16FromBytes(int64_t n, const char* x,
                                             float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = Bf16At(x, i) + y[i];
}

}  // namespace lockstep
