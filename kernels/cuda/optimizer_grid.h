// What each thread of kernels/cuda/optimizer.cu's update kernels does, as
// host-device functions of the thread's first index and the grid's stride:
// the kernels are one call each, and core/train/optimizer_grid_test runs
// these same functions on the CPU over an emulated grid against
// core/train/optimizer.cc (no device needed). Plain C++: no CUDA header.
#ifndef LOCKSTEP_KERNELS_CUDA_OPTIMIZER_GRID_H_
#define LOCKSTEP_KERNELS_CUDA_OPTIMIZER_GRID_H_

#include <math.h>
#include <stdint.h>

#include <cmath>

#include "kernels/cpu/host_device.h"
#include "kernels/cpu/optimizer_rules.h"
#include "kernels/cuda/overflow.h"

namespace lockstep {
namespace cuda {

// What the update does to the summed gradients first, read on the device
// (no wait for the host). sum_squares: a device pointer to the sum of
// squares of every gradient the optimizer updates (SumSquaresPartials then
// SumPartials, optimizer.h); null when nothing below needs it.
//   - Loss scaling (precision "fp16", core/train/loss_scale.h): the
//     gradients are `unscale`'s inverse times the true ones; each is
//     multiplied by unscale (1 / the scale, a power of two: exact) first,
//     and with skip_nonfinite the whole update is skipped (parameters and
//     slots untouched) when GradientsOverflowed (overflow.h) says so: an
//     inf or NaN in some gradient, or a norm past float's range after
//     unscaling. unscale 1 changes no bit.
//   - Clipping by the global norm (Keras' global_clipnorm, as
//     core/train/optimizer.cc's GlobalNorm and Update): with clipnorm > 0,
//     each gradient is then scaled by float(clipnorm / norm) when norm =
//     sqrt(*sum_squares) * unscale > clipnorm.
struct GradientClip {
  double clipnorm = 0;  // 0: no clipping
  const double* sum_squares = nullptr;
  float unscale = 1.0f;
  bool skip_nonfinite = false;
};

struct SgdStep {
  float lr = 0;
  float momentum = 0;
  bool nesterov = false;
  float decay_factor = 0;  // weight_decay * lr, in the runs with decay
  GradientClip clip;
};

struct AdamStep {
  float alpha = 0;  // lr * sqrt(1 - beta_2^t) / (1 - beta_1^t), t = iter + 1
  float one_minus_b1 = 0;
  float one_minus_b2 = 0;
  float eps = 0;
  float decay_factor = 0;  // weight_decay * lr, in the runs with decay
  GradientClip clip;
};

// A run of the flat buffers (GpuModel's params, padding included) for the
// updates: [begin, end) in floats, updated by the optimizer or not (batch
// norm's statistics, frozen layers: left to others), and with weight decay
// or not (DecaysWeights). A model's runs, in order, tile its buffer, so one
// launch updates every run: the clipping norm and the update were two
// launches per run before (about 140 for the BERT example, whose decay
// changes at every bias and LayerNorm).
struct FlatRun {
  int64_t begin = 0;
  int64_t end = 0;
  int32_t update = 0;  // 1: the optimizer updates it
  int32_t decay = 0;   // 1: weight decay applies (the steps' decay_factor)
};

// The steps' scalars, computed on the host as Optimizer::Update computes
// them.
inline SgdStep MakeSgdStep(double lr, double momentum, bool nesterov,
                           double weight_decay) {
  SgdStep s;
  s.lr = static_cast<float>(lr);
  s.momentum = static_cast<float>(momentum);
  s.nesterov = nesterov;
  s.decay_factor = static_cast<float>(weight_decay * lr);
  return s;
}

// `iterations` is Optimizer::iterations() before this step.
inline AdamStep MakeAdamStep(double lr, double beta_1, double beta_2,
                             double epsilon, double weight_decay,
                             int64_t iterations) {
  const double t = static_cast<double>(iterations + 1);
  AdamStep s;
  s.alpha = static_cast<float>(lr * std::sqrt(1.0 - std::pow(beta_2, t)) /
                               (1.0 - std::pow(beta_1, t)));
  s.one_minus_b1 = static_cast<float>(1.0 - beta_1);
  s.one_minus_b2 = static_cast<float>(1.0 - beta_2);
  s.eps = static_cast<float>(epsilon);
  s.decay_factor = static_cast<float>(weight_decay * lr);
  return s;
}

// ClipGradients' scale: float(clipnorm / norm) above the norm, else 1 (x *
// 1.0f is x, bit for bit).
LOCKSTEP_HOST_DEVICE inline float ClipScale(const GradientClip& c) {
  if (c.sum_squares == nullptr || !(c.clipnorm > 0)) return 1.0f;
  const double norm = sqrt(*c.sum_squares) * static_cast<double>(c.unscale);
  return norm > c.clipnorm ? static_cast<float>(c.clipnorm / norm) : 1.0f;
}

// Loss scaling's overflow: the step is skipped on every element.
LOCKSTEP_HOST_DEVICE inline bool Skipped(const GradientClip& c) {
  return c.skip_nonfinite && c.sum_squares != nullptr &&
         GradientsOverflowed(*c.sum_squares, c.unscale);
}

// The first run of `runs` that ends after i (runs tile [0, n)).
LOCKSTEP_HOST_DEVICE inline int RunOf(const FlatRun* runs, int count,
                                      int64_t i) {
  int lo = 0, hi = count;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (runs[mid].end <= i) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Moves *k to the run holding *i, first stepping *i over runs the optimizer
// does not update (by whole strides, as the grid-stride loop would). False
// once *i is past the last run.
LOCKSTEP_HOST_DEVICE inline bool ToUpdatedRun(const FlatRun* runs, int count,
                                              int64_t stride, int64_t* i,
                                              int* k) {
  while (*k < count) {
    const FlatRun& r = runs[*k];
    if (*i >= r.end) {
      ++*k;
    } else if (r.update != 0) {
      return true;
    } else {
      *i += (r.end - *i + stride - 1) / stride * stride;
      ++*k;
    }
  }
  return false;
}

// Calls f(i, run) for each element of an optimizer run that the thread
// whose grid-stride loop starts at `first` visits (i = first, first +
// stride, ... below n).
template <typename F>
LOCKSTEP_HOST_DEVICE inline void ForUpdated(int64_t first, int64_t stride,
                                            int64_t n, const FlatRun* runs,
                                            int count, F f) {
  int64_t i = first;
  if (i >= n) return;
  int k = RunOf(runs, count, i);
  while (ToUpdatedRun(runs, count, stride, &i, &k) && i < n) {
    f(i, runs[k]);
    i += stride;
  }
}

// One thread of the SGD kernel: decay, then plain SGD (m null), momentum
// or Nesterov, on each element it visits; nothing when the step is skipped.
LOCKSTEP_HOST_DEVICE inline void SgdThread(int64_t first, int64_t stride,
                                           int64_t n, const FlatRun* runs,
                                           int count, const SgdStep& s,
                                           float* w, float* m, const float* g) {
  if (Skipped(s.clip)) return;
  const float scale = ClipScale(s.clip);
  const float unscale = s.clip.unscale;
  ForUpdated(first, stride, n, runs, count, [&](int64_t i, const FlatRun& run) {
    // Each value is loaded once and stored once: the compiler cannot
    // prove that w, m and g do not alias.
    float wi = w[i];
    if (run.decay != 0) DecayRule(&wi, s.decay_factor);
    const float gi = (g[i] * unscale) * scale;
    if (m == nullptr) {
      SgdRule(&wi, gi, s.lr);
    } else {
      float mi = m[i];
      if (s.nesterov) {
        NesterovRule(&wi, &mi, gi, s.lr, s.momentum);
      } else {
        MomentumRule(&wi, &mi, gi, s.lr, s.momentum);
      }
      m[i] = mi;
    }
    w[i] = wi;
  });
}

// One thread of the Adam/AdamW kernel.
LOCKSTEP_HOST_DEVICE inline void AdamThread(int64_t first, int64_t stride,
                                            int64_t n, const FlatRun* runs,
                                            int count, const AdamStep& s,
                                            float* w, float* m, float* v,
                                            const float* g) {
  if (Skipped(s.clip)) return;
  const float scale = ClipScale(s.clip);
  const float unscale = s.clip.unscale;
  ForUpdated(first, stride, n, runs, count, [&](int64_t i, const FlatRun& run) {
    float wi = w[i], mi = m[i], vi = v[i];
    if (run.decay != 0) DecayRule(&wi, s.decay_factor);
    const float gi = (g[i] * unscale) * scale;
    AdamRule(&wi, &mi, &vi, gi, s.alpha, s.one_minus_b1, s.one_minus_b2, s.eps);
    m[i] = mi;
    v[i] = vi;
    w[i] = wi;
  });
}

// One thread's share of sum(g[i]^2) over the optimizer runs, in double
// (the kernel then sums its block's threads in a fixed tree).
LOCKSTEP_HOST_DEVICE inline double SumSquaresThread(int64_t first,
                                                    int64_t stride, int64_t n,
                                                    const FlatRun* runs,
                                                    int count, const float* g) {
  double part = 0;
  ForUpdated(first, stride, n, runs, count, [&](int64_t i, const FlatRun&) {
    part += static_cast<double>(g[i]) * g[i];
  });
  return part;
}

// One thread of the moving averages' kernel (kernels/cuda/layers/
// batch_norm.cu) over [0, n): skipped with the optimizer's step.
LOCKSTEP_HOST_DEVICE inline void MovingAverageThread(
    int64_t first, int64_t stride, int64_t n, float keep, float take,
    double inv, float* value, const float* g, const double* skip_sum_squares,
    float unscale) {
  if (skip_sum_squares != nullptr &&
      GradientsOverflowed(*skip_sum_squares, unscale)) {
    return;
  }
  for (int64_t i = first; i < n; i += stride) {
    MovingAverageRule(value + i, g[i], inv, keep, take);
  }
}

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_OPTIMIZER_GRID_H_
