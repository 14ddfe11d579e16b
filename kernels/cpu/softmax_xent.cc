// Rows in parallel (each: max, exp, sum, loss, then the gradient in
// place); the per-row results are summed in row order afterwards.
#include "kernels/cpu/softmax_xent.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace {

// Row elements per ParallelFor range.
constexpr int64_t kGrain = 1 << 14;

// The first index of the row's maximum: the maximum in 8 vectorizable
// lanes, then a scan for its first occurrence.
LOCKSTEP_VECTOR_CLONES int64_t ArgmaxRow(int64_t cols, const float* x) {
  float lanes[8];
  std::fill(lanes, lanes + 8, x[0]);
  int64_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    for (int k = 0; k < 8; ++k) {
      lanes[k] = lanes[k] > x[c + k] ? lanes[k] : x[c + k];
    }
  }
  for (; c < cols; ++c) lanes[0] = lanes[0] > x[c] ? lanes[0] : x[c];
  const float m = *std::max_element(lanes, lanes + 8);
  int64_t best = 0;
  while (best + 1 < cols && !(x[best] == m)) ++best;
  return best;
}

// e = exp(x - m); returns sum(e) in double, 4 lanes (the conversions and
// adds vectorize).
LOCKSTEP_VECTOR_CLONES double ExpSumRow(int64_t n, const float* x, float m,
                                        float* e) {
  for (int64_t c = 0; c < n; ++c) e[c] = ExpNonPositive(x[c] - m);
  double acc[4] = {};
  int64_t c = 0;
  for (; c + 4 <= n; c += 4) {
    for (int k = 0; k < 4; ++k) acc[k] += e[c + k];
  }
  for (; c < n; ++c) acc[0] += e[c];
  return (acc[0] + acc[2]) + (acc[1] + acc[3]);
}

}  // namespace

LossSums SoftmaxCrossEntropy(int64_t rows, int64_t cols, const float* logits,
                             const int32_t* labels, float scale, float* grad,
                             float* row_loss) {
  LossSums sums;
  if (cols <= 0 || rows <= 0) return sums;
  std::vector<double> losses(rows);
  std::vector<char> correct(rows);
  ParallelFor(rows, std::max<int64_t>(1, kGrain / cols),
              [&](int64_t begin, int64_t end) {
                thread_local std::vector<float> scratch;
                for (int64_t r = begin; r < end; ++r) {
                  const float* x = logits + r * cols;
                  float* g = grad == nullptr ? nullptr : grad + r * cols;
                  const int64_t label = labels[r];
                  if (label < 0) {
                    losses[r] = 0;
                    correct[r] = 0;
                    if (g != nullptr) std::fill(g, g + cols, 0.0f);
                    continue;
                  }
                  const int64_t best = ArgmaxRow(cols, x);
                  correct[r] = best == label;
                  const float m = x[best];
                  const float x_label = x[label];
                  // exp(x - m), into the gradient row (which may be the
                  // logits).
                  float* e = g;
                  if (e == nullptr) {
                    if (static_cast<int64_t>(scratch.size()) < cols)
                      scratch.resize(cols);
                    e = scratch.data();
                  }
                  const double sum = ExpSumRow(cols, x, m, e);
                  losses[r] = m + std::log(sum) - x_label;
                  if (g != nullptr) {
                    const float f = static_cast<float>(scale / sum);
                    for (int64_t c = 0; c < cols; ++c) g[c] = e[c] * f;
                    g[label] -= scale;
                  }
                }
              });
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] < 0) continue;
    sums.loss_sum += losses[r];
    sums.correct += correct[r];
    ++sums.count;
    if (row_loss != nullptr) row_loss[r] = static_cast<float>(losses[r]);
  }
  if (row_loss != nullptr) {
    for (int64_t r = 0; r < rows; ++r) {
      if (labels[r] < 0) row_loss[r] = 0.0f;
    }
  }
  return sums;
}

int64_t CountArgmaxCorrect(int64_t rows, int64_t cols, const float* x,
                           const int32_t* labels) {
  if (cols <= 0) return 0;
  int64_t correct = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] >= 0 && ArgmaxRow(cols, x + r * cols) == labels[r]) {
      ++correct;
    }
  }
  return correct;
}

}  // namespace lockstep
