// The synthetic task described in synthetic_data.h.
#include "core/data/synthetic_data.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/random.h"

namespace lockstep {
namespace {

constexpr int kModesPerClass = 2;
constexpr float kNoise = 0.6f;
constexpr float kMinContrast = 0.6f, kMaxContrast = 1.4f;

// Prototypes: [num_classes * kModesPerClass][H*W*C], N(0, 1) pixels blended
// with their 3x3 neighbourhood (roughly unit variance, spatially correlated).
std::vector<float> MakePrototypes(uint64_t seed, int64_t num_classes) {
  const int64_t h = kSyntheticHeight, w = kSyntheticWidth,
                c = kSyntheticChannels, per = h * w * c;
  const int64_t count = num_classes * kModesPerClass;
  Rng rng(MixSeed(seed, 0x70726f746fULL));  // "proto"
  std::vector<float> raw(per), protos(count * per);
  for (int64_t p = 0; p < count; ++p) {
    for (float& v : raw) v = rng.Normal();
    float* out = &protos[p * per];
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        for (int64_t ch = 0; ch < c; ++ch) {
          float sum = 0;
          int n = 0;
          for (int64_t dy = -1; dy <= 1; ++dy) {
            for (int64_t dx = -1; dx <= 1; ++dx) {
              const int64_t yy = y + dy, xx = x + dx;
              if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
              sum += raw[(yy * w + xx) * c + ch];
              ++n;
            }
          }
          // sum / sqrt(n) has unit variance; averaging it with the centre
          // keeps neighbouring pixels distinct.
          const float centre = raw[(y * w + x) * c + ch];
          out[(y * w + x) * c + ch] =
              0.5f * (sum / std::sqrt(static_cast<float>(n)) + centre);
        }
      }
    }
  }
  return protos;
}

}  // namespace

Dataset MakeSyntheticDataset(uint64_t seed, Split split, int64_t num_samples,
                             int64_t num_classes, double scale) {
  Dataset d;
  d.sample_shape = SyntheticSampleShape();
  d.num_samples = num_samples;
  d.num_classes = num_classes;
  d.source = absl::StrCat("synthetic(seed=", seed, ", n=", num_samples,
                          split == Split::kTrain ? ", train" : ", test", ")");
  const int64_t per = NumElements(d.sample_shape);
  if (num_samples <= 0 || num_classes <= 0) {
    d.num_samples = 0;
    return d;
  }
  const std::vector<float> protos = MakePrototypes(seed, num_classes);
  d.features.resize(num_samples * per);
  d.labels.resize(num_samples);
  const uint64_t stream = MixSeed(seed, split == Split::kTrain ? 1 : 2);
  for (int64_t i = 0; i < num_samples; ++i) {
    // One generator per sample: sample i does not depend on n.
    Rng rng(MixSeed(stream, static_cast<uint64_t>(i)));
    const int64_t label = static_cast<int64_t>(rng.UniformInt(num_classes));
    const int64_t mode = static_cast<int64_t>(rng.UniformInt(kModesPerClass));
    const float contrast = rng.Uniform(kMinContrast, kMaxContrast);
    const float* p = &protos[(label * kModesPerClass + mode) * per];
    float* out = &d.features[i * per];
    for (int64_t k = 0; k < per; ++k) {
      const float v = std::tanh(contrast * p[k] + kNoise * rng.Normal());
      out[k] = static_cast<float>(v / scale);
    }
    d.labels[i] = static_cast<int32_t>(label);
  }
  return d;
}

}  // namespace lockstep
