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

// Writes `rgb` ([height, width, 3] bytes) to `path` as an RGB PNG; fails
// the test with libpng's message on an error.
inline void WritePng(const std::string& path, int width, int height,
                     const std::vector<uint8_t>& rgb) {
  ASSERT_EQ(rgb.size(), static_cast<size_t>(width) * height * 3) << path;
  png_image p;
  std::memset(&p, 0, sizeof(p));
  p.version = PNG_IMAGE_VERSION;
  p.width = static_cast<png_uint_32>(width);
  p.height = static_cast<png_uint_32>(height);
  p.format = PNG_FORMAT_RGB;
  ASSERT_TRUE(
      png_image_write_to_file(&p, path.c_str(), 0, rgb.data(), 0, nullptr))
      << path << ": " << p.message;
}

}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_TESTS_PNG_WRITER_H_
