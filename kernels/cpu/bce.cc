// Serial over rows: one logit each, fixed-order sums.
#include "kernels/cpu/bce.h"

#include <algorithm>
#include <cmath>

namespace lockstep {

LossSums BinaryCrossEntropy(int64_t rows, const float* logits,
                            const int32_t* labels, float scale, float* grad) {
  LossSums sums;
  for (int64_t r = 0; r < rows; ++r) {
    const float z = logits[r];
    if (labels[r] < 0) {
      if (grad != nullptr) grad[r] = 0.0f;
      continue;
    }
    ++sums.count;
    const float t = labels[r] > 0 ? 1.0f : 0.0f;
    sums.correct += (z > 0.0f) == (t > 0.0f) ? 1 : 0;
    sums.loss_sum += double{std::max(z, 0.0f)} - double{z} * t +
                     std::log1p(std::exp(-std::fabs(double{z})));
    if (grad != nullptr) {
      // sigmoid(z) without overflow: exp of a non-positive argument only.
      const float e = std::exp(-std::fabs(z));
      const float p = z >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
      grad[r] = (p - t) * scale;
    }
  }
  return sums;
}

}  // namespace lockstep
