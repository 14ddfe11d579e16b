// JPEG through libjpeg-turbo's libjpeg API (errors longjmp out of the
// decoder, which owns no C++ objects), PNG through libpng's simplified API.
#include "core/data/image_codec.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

#include <jpeglib.h>
#include <png.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace lockstep {
namespace {

struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

// Whether a header declares more than kMaxImagePixels: checked before the
// decoder or this file allocates anything of that size (a few bytes can
// declare 65500 x 65500 pixels, 12 GB as RGB). Both sizes are below 2^32.
bool TooManyPixels(uint64_t width, uint64_t height) {
  return width * height > static_cast<uint64_t>(kMaxImagePixels);
}

absl::Status TooManyPixelsError(const char* kind, uint64_t width,
                                uint64_t height) {
  return absl::InvalidArgumentError(absl::StrCat(
      kind, ": ", width, "x", height, " is ", width * height,
      " pixels, over the limit of ", kMaxImagePixels, " (kMaxImagePixels)"));
}

void JpegErrorExit(j_common_ptr cinfo) {
  JpegError* e = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

// libjpeg warns (and goes on) on a premature end of data: that is a
// truncated file here.
void JpegWarning(j_common_ptr cinfo, int level) {
  if (level >= 0) return;  // trace messages
  JpegError* e = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

absl::StatusOr<RgbImage> DecodeJpeg(absl::string_view bytes) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  err.message[0] = '\0';
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = JpegErrorExit;
  err.mgr.emit_message = JpegWarning;
  // Every object with a destructor lives from before the setjmp, so a
  // longjmp out of libjpeg skips none.
  RgbImage img;
  std::vector<uint8_t> ink;  // one CMYK row
  // volatile: read after a longjmp.
  volatile bool created = false;
  if (setjmp(err.jump) != 0) {
    if (created) jpeg_destroy_decompress(&cinfo);
    return absl::InvalidArgumentError(
        absl::StrCat("JPEG: ", err.message[0] ? err.message : "corrupt"));
  }
  jpeg_create_decompress(&cinfo);
  created = true;
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()),
               static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  // Before jpeg_start_decompress, which allocates whole-image buffers for
  // progressive files. (No Status lives here: a longjmp would skip it.)
  if (TooManyPixels(cinfo.image_width, cinfo.image_height)) {
    const uint64_t width = cinfo.image_width, height = cinfo.image_height;
    jpeg_destroy_decompress(&cinfo);
    return TooManyPixelsError("JPEG", width, height);
  }
  // libjpeg cannot turn CMYK (or YCCK) into RGB itself: read CMYK and
  // convert here, as PIL does (Adobe's files store the inks inverted).
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK ||
                    cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(&cinfo);
  img.height = cinfo.output_height;
  img.width = cinfo.output_width;
  img.pixels.resize(img.height * img.width * 3);
  ink.assign(cmyk ? img.width * 4 : 0, 0);
  const bool inverted = cinfo.saw_Adobe_marker;
  while (cinfo.output_scanline < cinfo.output_height) {
    uint8_t* out = img.pixels.data() + cinfo.output_scanline * img.width * 3;
    JSAMPROW row = cmyk ? ink.data() : out;
    jpeg_read_scanlines(&cinfo, &row, 1);
    for (int64_t x = 0; cmyk && x < img.width; ++x) {
      // value = (255 - ink) * (255 - black) / 255, inks stored as
      // 255 - ink when inverted.
      int k = ink[x * 4 + 3];
      if (!inverted) k = 255 - k;
      for (int c = 0; c < 3; ++c) {
        int v = ink[x * 4 + c];
        if (!inverted) v = 255 - v;
        out[x * 3 + c] = static_cast<uint8_t>((v * k + 127) / 255);
      }
    }
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return img;
}

absl::StatusOr<RgbImage> DecodePng(absl::string_view bytes) {
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, bytes.data(), bytes.size())) {
    return absl::InvalidArgumentError(absl::StrCat("PNG: ", image.message));
  }
  // Before PNG_IMAGE_SIZE, which is 32-bit arithmetic (it wraps for
  // 100000 x 100000 to a 4 GB buffer), and the allocation.
  if (TooManyPixels(image.width, image.height)) {
    png_image_free(&image);
    return TooManyPixelsError("PNG", image.width, image.height);
  }
  image.format = PNG_FORMAT_RGB;
  RgbImage img;
  img.height = image.height;
  img.width = image.width;
  img.pixels.resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, img.pixels.data(), 0, nullptr)) {
    const std::string message = image.message;
    png_image_free(&image);
    return absl::InvalidArgumentError(absl::StrCat("PNG: ", message));
  }
  return img;
}

}  // namespace

ImageKind SniffImage(absl::string_view bytes) {
  if (bytes.size() >= 3 && static_cast<uint8_t>(bytes[0]) == 0xFF &&
      static_cast<uint8_t>(bytes[1]) == 0xD8 &&
      static_cast<uint8_t>(bytes[2]) == 0xFF) {
    return ImageKind::kJpeg;
  }
  static const char kPng[] = "\x89PNG\r\n\x1a\n";
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPng, 8) == 0) {
    return ImageKind::kPng;
  }
  return ImageKind::kUnknown;
}

absl::StatusOr<RgbImage> DecodeImage(absl::string_view bytes) {
  absl::StatusOr<RgbImage> img;
  switch (SniffImage(bytes)) {
    case ImageKind::kJpeg:
      img = DecodeJpeg(bytes);
      break;
    case ImageKind::kPng:
      img = DecodePng(bytes);
      break;
    case ImageKind::kUnknown:
      return absl::InvalidArgumentError("not a JPEG or PNG file");
  }
  if (img.ok() && (img->height <= 0 || img->width <= 0)) {
    return absl::InvalidArgumentError("the image has no pixels");
  }
  return img;
}

void ImageToSample(const RgbImage& image, const CropWindow& window, bool flip,
                   int64_t out_h, int64_t out_w, ImagePreprocessing pre,
                   float* out) {
  // Per channel: value = pixel * scale[c] + shift[c].
  float scale[3], shift[3];
  for (int c = 0; c < 3; ++c) {
    switch (pre) {
      case ImagePreprocessing::kUnit:
        scale[c] = 1.0f / 255.0f;
        shift[c] = 0.0f;
        break;
      case ImagePreprocessing::kMobilenet:
        scale[c] = 1.0f / 127.5f;
        shift[c] = -1.0f;
        break;
      case ImagePreprocessing::kImagenet: {
        static const float kMean[3] = {0.485f, 0.456f, 0.406f};
        static const float kStd[3] = {0.229f, 0.224f, 0.225f};
        scale[c] = 1.0f / (255.0f * kStd[c]);
        shift[c] = -kMean[c] / kStd[c];
        break;
      }
    }
  }
  const double sy = window.height / static_cast<double>(out_h);
  const double sx = window.width / static_cast<double>(out_w);
  const int64_t h = image.height, w = image.width;
  const uint8_t* px = image.pixels.data();
  for (int64_t oy = 0; oy < out_h; ++oy) {
    // The source coordinate of the output pixel's centre.
    const double fy =
        std::min(std::max(window.top + (oy + 0.5) * sy - 0.5, 0.0),
                 static_cast<double>(h - 1));
    const int64_t y0 = static_cast<int64_t>(fy);
    const int64_t y1 = std::min(y0 + 1, h - 1);
    const float wy = static_cast<float>(fy - y0);
    for (int64_t ox = 0; ox < out_w; ++ox) {
      const int64_t col = flip ? out_w - 1 - ox : ox;
      const double fx =
          std::min(std::max(window.left + (col + 0.5) * sx - 0.5, 0.0),
                   static_cast<double>(w - 1));
      const int64_t x0 = static_cast<int64_t>(fx);
      const int64_t x1 = std::min(x0 + 1, w - 1);
      const float wx = static_cast<float>(fx - x0);
      float* o = out + (oy * out_w + ox) * 3;
      for (int c = 0; c < 3; ++c) {
        const float a = px[(y0 * w + x0) * 3 + c];
        const float b = px[(y0 * w + x1) * 3 + c];
        const float d = px[(y1 * w + x0) * 3 + c];
        const float e = px[(y1 * w + x1) * 3 + c];
        const float top = a + (b - a) * wx;
        const float bottom = d + (e - d) * wx;
        o[c] = (top + (bottom - top) * wy) * scale[c] + shift[c];
      }
    }
  }
}

}  // namespace lockstep
