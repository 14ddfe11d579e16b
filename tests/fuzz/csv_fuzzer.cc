// CSV datasets (data.format "csv", ReadCsvDataset): any file, raw or gzip,
// loads or is refused with a message, read both without and with a header
// line. A loaded set has at least one row, labels in [0, num_classes) and
// rows * width features. The two readings agree: with a header the set is
// the headerless one less its first row (a headerless set of one row has
// none left, and is refused).
//
// The whole input is the file. (The reader has no writer to round-trip.)
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/data/csv_reader.h"
#include "core/data/dataset.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

constexpr int64_t kNumClasses = 10;

void CheckLoaded(const lockstep::Dataset& d, const std::string& path) {
  FUZZ_CHECK(d.num_samples > 0);
  FUZZ_CHECK(d.num_classes == kNumClasses);
  FUZZ_CHECK(d.maker == nullptr);
  FUZZ_CHECK(d.source == path);
  FUZZ_CHECK(d.sample_shape.size() == 1 && d.sample_shape[0] >= 1);
  FUZZ_CHECK(static_cast<int64_t>(d.labels.size()) == d.num_samples);
  FUZZ_CHECK(static_cast<int64_t>(d.features.size()) ==
             d.num_samples * d.sample_shape[0]);
  for (int32_t label : d.labels) {
    FUZZ_CHECK(label >= 0 && label < kNumClasses);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep;
  const std::string path = fuzz::WriteScratch("data.csv", data, size);
  absl::StatusOr<Dataset> plain =
      ReadCsvDataset("data.train_path", path, /*header=*/false, kNumClasses,
                     /*scale=*/1.0);
  absl::StatusOr<Dataset> headed =
      ReadCsvDataset("data.train_path", path, /*header=*/true, kNumClasses,
                     /*scale=*/1.0);
  fuzz::CheckRefusal(plain.status());
  fuzz::CheckRefusal(headed.status());
  if (plain.ok()) CheckLoaded(*plain, path);
  if (headed.ok()) CheckLoaded(*headed, path);
  if (!plain.ok()) return 0;  // the first line may be a header only

  if (plain->num_samples == 1) {
    FUZZ_CHECK(!headed.ok());
    return 0;
  }
  FUZZ_CHECK(headed.ok());
  const int64_t width = plain->sample_shape[0];
  FUZZ_CHECK(headed->sample_shape == plain->sample_shape);
  FUZZ_CHECK(headed->num_samples == plain->num_samples - 1);
  FUZZ_CHECK(std::vector<int32_t>(plain->labels.begin() + 1,
                                  plain->labels.end()) == headed->labels);
  FUZZ_CHECK(std::vector<float>(plain->features.begin() + width,
                                plain->features.end()) == headed->features);
  return 0;
}
