// Serial over rows: few classes, fixed-order sums.
#include "kernels/cpu/mse.h"

#include <algorithm>

namespace lockstep {

LossSums MeanSquaredError(int64_t rows, int64_t cols, const float* y,
                          const int32_t* labels, float scale, float* grad) {
  LossSums sums;
  if (cols <= 0) return sums;
  sums.correct = CountArgmaxCorrect(rows, cols, y, labels);
  const float g_scale = 2.0f * scale / static_cast<float>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * cols;
    float* g = grad == nullptr ? nullptr : grad + r * cols;
    if (labels[r] < 0) {
      if (g != nullptr) std::fill(g, g + cols, 0.0f);
      continue;
    }
    ++sums.count;
    double loss = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      const float target =
          cols == 1 ? static_cast<float>(labels[r]) : (c == labels[r] ? 1 : 0);
      const float diff = yr[c] - target;
      loss += double{diff} * diff;
      if (g != nullptr) g[c] = diff * g_scale;
    }
    sums.loss_sum += loss / cols;
  }
  return sums;
}

}  // namespace lockstep
