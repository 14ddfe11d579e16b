// Image decoding (DecodeImage, the image_folder format's and `lockstep
// predict`'s reader): any bytes decode to an RGB image or are refused with a
// message; bytes that are neither JPEG nor PNG by their magic are refused as
// such. A decoded image has height, width > 0, at most kMaxImagePixels, and
// exactly height * width * 3 bytes of pixels. Made into a small sample
// (ImageToSample, the whole image, /255) every value lies in [0, 1], and
// the flipped sample is the sample mirrored.
//
// The whole input is the file's bytes. (There is no encoder to round-trip.)
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data/image_codec.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep;
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<RgbImage> img = DecodeImage(bytes);
  fuzz::CheckRefusal(img.status());
  if (SniffImage(bytes) == ImageKind::kUnknown) {
    FUZZ_CHECK(!img.ok());
    FUZZ_CHECK(img.status().message() == "not a JPEG or PNG file");
  }
  if (!img.ok()) return 0;

  FUZZ_CHECK(img->height > 0 && img->width > 0);
  FUZZ_CHECK(img->height <= kMaxImagePixels / img->width);
  FUZZ_CHECK(static_cast<int64_t>(img->pixels.size()) ==
             img->height * img->width * 3);

  // Rows and columns both shrink and grow (1 x N images included).
  constexpr int64_t kOutH = 3, kOutW = 4;
  const CropWindow whole{0, 0, static_cast<double>(img->height),
                         static_cast<double>(img->width)};
  std::vector<float> sample(kOutH * kOutW * 3), flipped(sample.size());
  ImageToSample(*img, whole, /*flip=*/false, kOutH, kOutW,
                ImagePreprocessing::kUnit, sample.data());
  ImageToSample(*img, whole, /*flip=*/true, kOutH, kOutW,
                ImagePreprocessing::kUnit, flipped.data());
  for (int64_t y = 0; y < kOutH; ++y) {
    for (int64_t x = 0; x < kOutW; ++x) {
      for (int64_t c = 0; c < 3; ++c) {
        const float v = sample[(y * kOutW + x) * 3 + c];
        FUZZ_CHECK(v >= 0.0f && v <= 1.0f);
        FUZZ_CHECK(flipped[(y * kOutW + (kOutW - 1 - x)) * 3 + c] == v);
      }
    }
  }
  return 0;
}
