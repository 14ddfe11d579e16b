// The optimizers' per-element rules (Keras 3's SGD, momentum, Nesterov,
// Adam and AdamW, and batch norm's moving averages) for host and device:
// core/train/optimizer.cc's loops and kernels/cuda's update kernels call
// these same functions, so a GPU replica's parameters are a CPU replica's
// bit for bit. Each is written operation by operation in float, without
// fused multiply-adds (the CPU builds at x86-64-v2, nvcc with --fmad=false;
// sqrtf and division are IEEE on both).
#ifndef LOCKSTEP_KERNELS_CPU_OPTIMIZER_RULES_H_
#define LOCKSTEP_KERNELS_CPU_OPTIMIZER_RULES_H_

#include <math.h>

#include "kernels/cpu/host_device.h"

namespace lockstep {

// Keras' decoupled weight decay, applied before the update: w -= w *
// factor, factor = weight_decay * lr.
LOCKSTEP_HOST_DEVICE inline void DecayRule(float* w, float factor) {
  *w -= *w * factor;
}

// SGD without momentum: w -= g * lr.
LOCKSTEP_HOST_DEVICE inline void SgdRule(float* w, float g, float lr) {
  *w -= g * lr;
}

// Momentum: m = m * momentum - g * lr; w += m.
LOCKSTEP_HOST_DEVICE inline void MomentumRule(float* w, float* m, float g,
                                              float lr, float momentum) {
  const float mi = *m * momentum - g * lr;
  *m = mi;
  *w += mi;
}

// Nesterov: m = m * momentum - g * lr; w += m * momentum - g * lr.
LOCKSTEP_HOST_DEVICE inline void NesterovRule(float* w, float* m, float g,
                                              float lr, float momentum) {
  const float gl = g * lr;
  const float mi = *m * momentum - gl;
  *m = mi;
  *w += mi * momentum - gl;
}

// Adam: m += (g - m)(1 - b1); v += (g^2 - v)(1 - b2); w -= m * alpha /
// (sqrt(v) + eps), alpha = lr * sqrt(1 - b2^t) / (1 - b1^t) for the whole
// step (computed in double on the host).
LOCKSTEP_HOST_DEVICE inline void AdamRule(float* w, float* m, float* v, float g,
                                          float alpha, float one_minus_b1,
                                          float one_minus_b2, float eps) {
  const float mi = *m + (g - *m) * one_minus_b1;
  const float vi = *v + (g * g - *v) * one_minus_b2;
  *m = mi;
  *v = vi;
  *w -= (mi * alpha) / (sqrtf(vi) + eps);
}

// A moving average (batch norm's statistics): value = value * keep +
// float(g * inv) * take, where g is the statistic summed over the global
// batch, inv = 1 / its samples and take = 1 - keep.
LOCKSTEP_HOST_DEVICE inline void MovingAverageRule(float* value, float g,
                                                   double inv, float keep,
                                                   float take) {
  const float batch = static_cast<float>(g * inv);
  *value = *value * keep + batch * take;
}

}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CPU_OPTIMIZER_RULES_H_
