// One pass per row: max, sum of exp, loss, then the gradient in place.
#include "kernels/cpu/softmax_xent.h"

#include <algorithm>
#include <cmath>

namespace lockstep {
namespace {

int64_t ArgmaxRow(int64_t cols, const float* x) {
  int64_t best = 0;
  for (int64_t c = 1; c < cols; ++c) {
    if (x[c] > x[best]) best = c;
  }
  return best;
}

}  // namespace

LossSums SoftmaxCrossEntropy(int64_t rows, int64_t cols, const float* logits,
                             const int32_t* labels, float scale, float* grad,
                             float* row_loss) {
  // Row counts are a batch slice and the classes few: serial is cheaper than
  // a pool hand-off, and keeps the double sum in a fixed order.
  LossSums sums;
  if (cols <= 0) return sums;
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits + r * cols;
    const int64_t label = labels[r];
    const int64_t best = ArgmaxRow(cols, x);
    if (best == label) ++sums.correct;
    const float m = x[best];
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(double{x[c]} - m);
    const double lse = m + std::log(sum);
    const double loss = lse - x[label];
    sums.loss_sum += loss;
    if (row_loss != nullptr) row_loss[r] = static_cast<float>(loss);
    if (grad != nullptr) {
      float* g = grad + r * cols;
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t c = 0; c < cols; ++c) {
        g[c] = std::exp(x[c] - m) * inv * scale;
      }
      g[label] -= scale;
    }
  }
  return sums;
}

int64_t CountArgmaxCorrect(int64_t rows, int64_t cols, const float* x,
                           const int32_t* labels) {
  if (cols <= 0) return 0;
  int64_t correct = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (ArgmaxRow(cols, x + r * cols) == labels[r]) ++correct;
  }
  return correct;
}

}  // namespace lockstep
