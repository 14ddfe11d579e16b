// What the image codec and image folder tests share: images made here
// (a gradient, a solid colour) written as PNG or JPEG with libpng and
// libjpeg, and folders under the test's temp folder.
#ifndef LOCKSTEP_CORE_DATA_IMAGE_FOLDER_TEST_UTIL_H_
#define LOCKSTEP_CORE_DATA_IMAGE_FOLDER_TEST_UTIL_H_

#include <jpeglib.h>
#include <png.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "core/data/image_codec.h"
#include "gtest/gtest.h"
#include "tests/png_writer.h"

namespace lockstep {
namespace testing {
namespace image {

inline RgbImage Gradient(int64_t h, int64_t w) {
  RgbImage img;
  img.height = h;
  img.width = w;
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      img.pixels.push_back(static_cast<uint8_t>(10 + 12 * x));
      img.pixels.push_back(static_cast<uint8_t>(20 + 9 * y));
      img.pixels.push_back(static_cast<uint8_t>(200 - 5 * (x + y)));
    }
  }
  return img;
}

inline RgbImage Solid(int64_t h, int64_t w, uint8_t r, uint8_t g, uint8_t b) {
  RgbImage img;
  img.height = h;
  img.width = w;
  for (int64_t i = 0; i < h * w; ++i) {
    img.pixels.insert(img.pixels.end(), {r, g, b});
  }
  return img;
}

// A PNG of `format` (PNG_FORMAT_RGB, _GRAY, _GA, _RGBA) at `path`; returns
// its bytes.
inline std::string WritePngOf(const std::string& path, png_uint_32 format,
                              int64_t width, int64_t height,
                              const std::vector<uint8_t>& px) {
  testing::WritePngOf(path, format, width, height, px);
  return ReadFile(path).value_or("");
}

inline void WritePng(const std::string& path, const RgbImage& img) {
  WritePngOf(path, PNG_FORMAT_RGB, img.width, img.height, img.pixels);
}

// A JPEG of `components` channels in `space` (JCS_RGB, JCS_GRAYSCALE,
// JCS_CMYK), optionally progressive.
inline std::string JpegOf(int64_t width, int64_t height, int components,
                          J_COLOR_SPACE space, const std::vector<uint8_t>& px,
                          int quality, bool progressive = false) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = static_cast<JDIMENSION>(width);
  c.image_height = static_cast<JDIMENSION>(height);
  c.input_components = components;
  c.in_color_space = space;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  if (progressive) jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(px.data()) +
                   c.next_scanline * width * components;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::string out(reinterpret_cast<char*>(buf), size);
  free(buf);
  return out;
}

inline std::string JpegBytes(const RgbImage& img, int quality) {
  return JpegOf(img.width, img.height, 3, JCS_RGB, img.pixels, quality);
}

inline std::string TempDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  EXPECT_TRUE(MakeDirs(dir).ok());
  return dir;
}

}  // namespace image
}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_DATA_IMAGE_FOLDER_TEST_UTIL_H_
