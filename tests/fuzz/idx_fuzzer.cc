// MNIST's IDX files (data.format "mnist_idx", ReadIdxDataset): any image
// and label file pair, raw or gzip, loads or is refused with a message.
// A loaded set has labels in [0, num_classes) and exactly count * rows *
// cols pixels in [0, 1]; written back as IDX (header and bytes) it is the
// raw file it came from, byte for byte.
//
// One input makes both files: its first 2 bytes (big-endian) are the image
// file's length n, clipped to what follows; the next n bytes are the image
// file and the rest the label file (under 2 bytes: two empty files).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "absl/numeric/int128.h"
#include "absl/status/statusor.h"
#include "core/data/dataset.h"
#include "core/data/idx_reader.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

constexpr int64_t kNumClasses = 10;
constexpr double kScale = 255.0;

std::string Be32(uint32_t v) {
  return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                     static_cast<char>(v >> 8), static_cast<char>(v)};
}

bool IsGzip(const std::string& bytes) {
  return bytes.size() >= 2 && static_cast<uint8_t>(bytes[0]) == 0x1f &&
         static_cast<uint8_t>(bytes[1]) == 0x8b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep;
  const size_t head = std::min<size_t>(size, 2);
  const size_t n =
      size < 2 ? 0
               : std::min<size_t>((size_t{data[0]} << 8) | data[1], size - 2);
  const std::string images(reinterpret_cast<const char*>(data) + head, n);
  const std::string labels(reinterpret_cast<const char*>(data) + head + n,
                           size - head - n);
  const std::string images_path = fuzz::WriteScratch(
      "images", reinterpret_cast<const uint8_t*>(images.data()), images.size());
  const std::string labels_path = fuzz::WriteScratch(
      "labels", reinterpret_cast<const uint8_t*>(labels.data()), labels.size());

  absl::StatusOr<Dataset> d =
      ReadIdxDataset("data.train_images", images_path, "data.train_labels",
                     labels_path, kNumClasses, kScale);
  fuzz::CheckRefusal(d.status());
  if (!d.ok()) return 0;

  FUZZ_CHECK(d->sample_shape.size() == 2);
  const int64_t rows = d->sample_shape[0], cols = d->sample_shape[1];
  FUZZ_CHECK(rows > 0 && cols > 0);
  FUZZ_CHECK(d->num_samples >= 0);
  FUZZ_CHECK(d->num_classes == kNumClasses);
  FUZZ_CHECK(d->maker == nullptr);
  FUZZ_CHECK(static_cast<int64_t>(d->labels.size()) == d->num_samples);
  // In 128 bits: a set of no images may still declare huge images.
  FUZZ_CHECK(absl::uint128(d->features.size()) ==
             absl::uint128(static_cast<uint64_t>(d->num_samples)) *
                 static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols));
  for (int32_t label : d->labels) {
    FUZZ_CHECK(label >= 0 && label < kNumClasses);
  }
  for (float v : d->features) FUZZ_CHECK(v >= 0.0f && v <= 1.0f);

  // Written back: the same bytes as each raw (not gzip) file.
  const uint32_t count = static_cast<uint32_t>(d->num_samples);
  if (!IsGzip(images)) {
    std::string written = Be32(0x00000803) + Be32(count) +
                          Be32(static_cast<uint32_t>(rows)) +
                          Be32(static_cast<uint32_t>(cols));
    for (float v : d->features) {
      written.push_back(static_cast<char>(std::lround(v * kScale)));
    }
    FUZZ_CHECK(written == images);
  }
  if (!IsGzip(labels)) {
    std::string written = Be32(0x00000801) + Be32(count);
    for (int32_t label : d->labels) written.push_back(static_cast<char>(label));
    FUZZ_CHECK(written == labels);
  }
  return 0;
}
