// A seeded, learnable synthetic classification task, so jobs and tests run
// without any data files.
//
// Each class c has two prototype images (a mixture, so a class is not one
// convex blob) drawn from N(0, 1) per pixel and smoothed over 3x3
// neighbourhoods (local structure that a CNN can use). A sample of class c is
//   x = tanh(a * p + 0.6 * noise),  p = one of c's two prototypes,
//   a ~ U[0.6, 1.4] (per-sample contrast), noise ~ N(0, 1) per pixel,
// then divided by DataSpec::scale. Labels are uniform over num_classes, so
// chance accuracy is 1 / num_classes; a small MLP passes 0.9 in an epoch or
// two. Prototypes depend only on the seed; train and test draw samples from the
// same distribution with different streams.
#ifndef LOCKSTEP_CORE_DATA_SYNTHETIC_DATA_H_
#define LOCKSTEP_CORE_DATA_SYNTHETIC_DATA_H_

#include <cstdint>

#include "core/data/dataset.h"

namespace lockstep {

// Rank-3 HWC, so an MLP (after flatten, 64 inputs) and a CNN both accept it.
inline const Shape& SyntheticSampleShape() {
  static const Shape* const kShape = new Shape{8, 8, 1};
  return *kShape;
}
inline constexpr int64_t kSyntheticHeight = 8;
inline constexpr int64_t kSyntheticWidth = 8;
inline constexpr int64_t kSyntheticChannels = 1;

// `num_samples` samples of the split; deterministic in (seed, split,
// num_classes, num_samples): sample i is the same for any larger n.
Dataset MakeSyntheticDataset(uint64_t seed, Split split, int64_t num_samples,
                             int64_t num_classes, double scale);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_DATA_SYNTHETIC_DATA_H_
