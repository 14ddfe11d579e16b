// The per-sample access the batcher and evaluation use (see dataset.h).
#include "core/data/dataset.h"

#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/str_format.h"

namespace lockstep {

void Dataset::Fill(int64_t epoch, int64_t i, float* x, int32_t* out) const {
  if (maker != nullptr) {
    maker->Make(epoch, first_index + i, x, out);
    return;
  }
  const int64_t per = NumElements(sample_shape);
  std::memcpy(x, features.data() + i * per, sizeof(float) * per);
  std::memcpy(out, labels.data() + i * labels_per_sample,
              sizeof(int32_t) * labels_per_sample);
}

int64_t Dataset::LabelCount(int64_t i) const {
  return maker != nullptr ? maker->LabelCount(first_index + i)
                          : labels_per_sample;
}

Dataset Dataset::Slice(int64_t begin, int64_t end) const {
  Dataset out;
  out.sample_shape = sample_shape;
  out.num_classes = num_classes;
  out.labels_per_sample = labels_per_sample;
  out.num_samples = end - begin;
  out.maker = maker;
  out.vocab = vocab;
  out.first_index = first_index + begin;
  if (maker == nullptr) {
    const int64_t per = NumElements(sample_shape);
    out.features.assign(features.begin() + begin * per,
                        features.begin() + end * per);
    out.labels.assign(labels.begin() + begin * labels_per_sample,
                      labels.begin() + end * labels_per_sample);
  }
  out.source = absl::StrFormat("%s rows %d..%d", source, begin, end);
  return out;
}

std::vector<std::string> SkippedSamples(
    const std::vector<const Dataset*>& datasets) {
  std::set<std::string> names;
  for (const Dataset* d : datasets) {
    if (d->maker == nullptr) continue;
    for (std::string& n : d->maker->Skipped()) names.insert(std::move(n));
  }
  return std::vector<std::string>(names.begin(), names.end());
}

}  // namespace lockstep
