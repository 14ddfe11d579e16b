// Writing PNG test images with libpng's simplified API (tests that build
// image folders).
#ifndef LOCKSTEP_TESTS_PNG_WRITER_H_
#define LOCKSTEP_TESTS_PNG_WRITER_H_

#include <png.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep {
namespace testing {

// Writes `pixels` ([height, width, channels] bytes; `format` is
// PNG_FORMAT_RGB, _GRAY, _GA or _RGBA) to `path` as a PNG; fails the test
// with libpng's message on an error.
inline void WritePngOf(const std::string& path, png_uint_32 format,
                       int64_t width, int64_t height,
                       const std::vector<uint8_t>& pixels) {
  ASSERT_EQ(pixels.size(),
            static_cast<size_t>(width * height * PNG_IMAGE_PIXEL_SIZE(format)))
      << path;
  png_image p;
  std::memset(&p, 0, sizeof(p));
  p.version = PNG_IMAGE_VERSION;
  p.width = static_cast<png_uint_32>(width);
  p.height = static_cast<png_uint_32>(height);
  p.format = format;
  ASSERT_TRUE(
      png_image_write_to_file(&p, path.c_str(), 0, pixels.data(), 0, nullptr))
      << path << ": " << p.message;
}

// An RGB PNG of `rgb` ([height, width, 3] bytes).
inline void WritePng(const std::string& path, int width, int height,
                     const std::vector<uint8_t>& rgb) {
  WritePngOf(path, PNG_FORMAT_RGB, width, height, rgb);
}

}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_TESTS_PNG_WRITER_H_
