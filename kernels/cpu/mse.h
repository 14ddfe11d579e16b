// Mean squared error against a sparse label, as Keras' MeanSquaredError on
// one-hot targets: the mean over output units per row.
#ifndef LOCKSTEP_KERNELS_CPU_MSE_H_
#define LOCKSTEP_KERNELS_CPU_MSE_H_

#include <cstdint>

#include "kernels/cpu/softmax_xent.h"

namespace lockstep {

// Row loss mean_c (y[r, c] - t[r, c])^2 with t = onehot(label[r]) when
// cols > 1, and t = label[r] itself when cols == 1 (a regression target).
// When grad is not null it gets d(row loss)/dy * scale; it may alias y.
// correct counts rows whose first argmax equals the label. A row whose
// label is negative has no loss (zero grad) and is not counted.
LossSums MeanSquaredError(int64_t rows, int64_t cols, const float* y,
                          const int32_t* labels, float scale, float* grad);

}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CPU_MSE_H_
