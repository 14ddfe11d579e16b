// fp16 loss scaling's overflow test, one rule for the update kernels, the
// moving averages' kernel and the host's decision (DeviceOptimizer::
// GradientsFinite): a step is skipped when the summed gradients' sum of
// squares is not finite, or when their norm after unscaling is past
// float's range (with a scale below 1, g * unscale could overflow although
// g did not: PyTorch's GradScaler tests after unscaling too).
#ifndef LOCKSTEP_KERNELS_CUDA_OVERFLOW_H_
#define LOCKSTEP_KERNELS_CUDA_OVERFLOW_H_

#include <math.h>

#include "kernels/cpu/host_device.h"

namespace lockstep {
namespace cuda {

LOCKSTEP_HOST_DEVICE inline bool GradientsOverflowed(double sum_squares,
                                                     float unscale) {
  // NaN fails the comparison; sqrt(inf) is inf.
  const double norm = sqrt(sum_squares) * static_cast<double>(unscale);
  return !(norm <= 3.4028234663852886e38);  // FLT_MAX
}

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_OVERFLOW_H_
