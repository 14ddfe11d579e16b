// Decoding JPEG (libjpeg-turbo) and PNG (libpng) files into 8-bit RGB, and
// turning a decoded image into a model sample: an optional crop window and
// horizontal flip, a bilinear resize to the model's size, and a named
// preprocessing. No hand-written decoders.
#ifndef LOCKSTEP_CORE_DATA_IMAGE_CODEC_H_
#define LOCKSTEP_CORE_DATA_IMAGE_CODEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep {

// How image pixel values become model inputs.
enum class ImagePreprocessing {
  kUnit,       // x / 255, in [0, 1]
  kMobilenet,  // x / 127.5 - 1, in [-1, 1] (Keras' mobilenet_v2)
  kImagenet,   // (x / 255 - mean) / std per channel (torchvision's)
};

struct RgbImage {
  int64_t height = 0, width = 0;
  std::vector<uint8_t> pixels;  // [height, width, 3], row-major
};

enum class ImageKind { kUnknown, kJpeg, kPng };
// From the file's first bytes (its magic number), not its name.
ImageKind SniffImage(absl::string_view bytes);

// The most pixels DecodeImage decodes: 2^27 (e.g. 16384 x 8192, a 402 MB RGB
// buffer), well above ImageNet's and most photos' sizes, and above PIL's
// own warning threshold (89 million). A header declaring more is refused
// before any pixel buffer is allocated.
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 27;

// Decodes a whole JPEG or PNG file's bytes (grey, palette and alpha
// images become RGB). 16-bit PNG channels become 8 bits through libpng's
// simplified API, which is not a plain >> 8 (what PIL does): it takes
// 16-bit values as linear light unless the file's gAMA/sRGB/iCCP chunk
// says otherwise, and encodes them with the sRGB curve, so the mid-tones
// of a 16-bit file without those chunks come out brighter than PIL's.
// 8-bit files, nearly all datasets, are not converted. Errors
// (kInvalidArgument) say what is wrong: "not a JPEG or PNG file",
// "truncated JPEG", libpng's or libjpeg's own message, an image over
// kMaxImagePixels.
absl::StatusOr<RgbImage> DecodeImage(absl::string_view bytes);

// The part of the source image a sample is made from: rows [top, top +
// height), columns [left, left + width).
struct CropWindow {
  double top = 0, left = 0, height = 0, width = 0;
};

// Writes the sample [out_h, out_w, 3]: `window` of `image`, mirrored left to
// right when `flip`, resized bilinearly (half-pixel centres, as
// tf.image.resize and torchvision without antialiasing) and preprocessed.
void ImageToSample(const RgbImage& image, const CropWindow& window, bool flip,
                   int64_t out_h, int64_t out_w, ImagePreprocessing pre,
                   float* out);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_DATA_IMAGE_CODEC_H_
