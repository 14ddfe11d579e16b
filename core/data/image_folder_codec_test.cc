// The image codec: JPEG and PNG files written here with libjpeg and
// libpng, decoded back (other pixel formats, CMYK, damaged files and
// headers declaring too many pixels included); the sample transform
// (resize, crop, flip, preprocessing) against hand-computed values.
#include "core/data/image_folder.h"

#include <jpeglib.h>
#include <png.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/file_util.h"
#include "core/data/image_codec.h"
#include "core/data/image_folder_test_util.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using testing::image::Gradient;
using testing::image::JpegBytes;
using testing::image::JpegOf;
using testing::image::Solid;
using testing::image::TempDir;
using testing::image::WritePng;
using testing::image::WritePngOf;

TEST(ImageCodecTest, PngRoundTripsExactly) {
  const std::string dir = TempDir("png");
  const RgbImage img = Gradient(5, 7);
  WritePng(dir + "/g.png", img);
  absl::StatusOr<std::string> bytes = ReadFile(dir + "/g.png");
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(SniffImage(*bytes), ImageKind::kPng);
  absl::StatusOr<RgbImage> back = DecodeImage(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->height, 5);
  EXPECT_EQ(back->width, 7);
  EXPECT_EQ(back->pixels, img.pixels);
}

TEST(ImageCodecTest, JpegDecodesCloseToItsSource) {
  const RgbImage img = Gradient(16, 16);
  const std::string bytes = JpegBytes(img, 95);
  EXPECT_EQ(SniffImage(bytes), ImageKind::kJpeg);
  absl::StatusOr<RgbImage> back = DecodeImage(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->pixels.size(), img.pixels.size());
  int worst = 0;
  for (size_t i = 0; i < img.pixels.size(); ++i) {
    worst = std::max(worst, std::abs(back->pixels[i] - img.pixels[i]));
  }
  EXPECT_LE(worst, 12);  // lossy, quality 95
}

// Grey, grey + alpha, RGBA, 16-bit PNGs and grey or progressive JPEGs all
// become 8-bit RGB (alpha composited onto black, 16 bits scaled to 8).
TEST(ImageCodecTest, OtherPixelFormatsBecomeRgb) {
  const std::string dir = TempDir("formats");
  // Grey 2x1: 10, 200.
  absl::StatusOr<RgbImage> grey = DecodeImage(
      WritePngOf(dir + "/g.png", PNG_FORMAT_GRAY, 2, 1, {10, 200}));
  ASSERT_TRUE(grey.ok()) << grey.status();
  EXPECT_EQ(grey->pixels, (std::vector<uint8_t>{10, 10, 10, 200, 200, 200}));
  // RGBA, opaque then fully transparent: the transparent pixel is black.
  absl::StatusOr<RgbImage> rgba = DecodeImage(WritePngOf(
      dir + "/a.png", PNG_FORMAT_RGBA, 2, 1, {1, 2, 3, 255, 90, 90, 90, 0}));
  ASSERT_TRUE(rgba.ok()) << rgba.status();
  EXPECT_EQ(rgba->pixels, (std::vector<uint8_t>{1, 2, 3, 0, 0, 0}));
  // Grey + alpha, opaque.
  absl::StatusOr<RgbImage> ga =
      DecodeImage(WritePngOf(dir + "/ga.png", PNG_FORMAT_GA, 1, 1, {77, 255}));
  ASSERT_TRUE(ga.ok()) << ga.status();
  EXPECT_EQ(ga->pixels, (std::vector<uint8_t>{77, 77, 77}));
  // A grey, progressive JPEG.
  absl::StatusOr<RgbImage> gj = DecodeImage(JpegOf(
      8, 8, 1, JCS_GRAYSCALE, std::vector<uint8_t>(64, 128), 95, true));
  ASSERT_TRUE(gj.ok()) << gj.status();
  ASSERT_EQ(gj->pixels.size(), 8u * 8 * 3);
  for (uint8_t v : gj->pixels) EXPECT_NEAR(v, 128, 2);
}

// A CMYK JPEG (as some ImageNet files are) decodes to RGB: libjpeg writes
// an Adobe marker, so the inks read as stored inverted (PIL's convention):
// value = ink * black / 255.
TEST(ImageCodecTest, CmykJpegBecomesRgb) {
  std::vector<uint8_t> cmyk;
  for (int p = 0; p < 64; ++p) cmyk.insert(cmyk.end(), {255, 128, 0, 255});
  const std::string bytes = JpegOf(8, 8, 4, JCS_CMYK, cmyk, 100);
  absl::StatusOr<RgbImage> img = DecodeImage(bytes);
  ASSERT_TRUE(img.ok()) << img.status();
  ASSERT_EQ(img->pixels.size(), 8u * 8 * 3);
  EXPECT_NEAR(img->pixels[0], 255, 3);
  EXPECT_NEAR(img->pixels[1], 128, 3);
  EXPECT_NEAR(img->pixels[2], 0, 3);
}

TEST(ImageCodecTest, DamagedFilesAreErrorsNotCrashes) {
  const std::string jpeg = JpegBytes(Gradient(32, 32), 90);
  absl::StatusOr<RgbImage> cut = DecodeImage(jpeg.substr(0, jpeg.size() / 2));
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().message(), "JPEG: Premature end of JPEG file");
  const std::string dir = TempDir("damaged");
  WritePng(dir + "/g.png", Gradient(32, 32));
  const std::string png = *ReadFile(dir + "/g.png");
  absl::StatusOr<RgbImage> short_png = DecodeImage(png.substr(0, png.size() - 20));
  ASSERT_FALSE(short_png.ok());
  EXPECT_EQ(short_png.status().message().substr(0, 5), "PNG: ");
  EXPECT_EQ(DecodeImage("GIF89a....").status().message(),
            "not a JPEG or PNG file");
  EXPECT_EQ(DecodeImage("").status().message(), "not a JPEG or PNG file");
  absl::StatusOr<RgbImage> header_only = DecodeImage(jpeg.substr(0, 3));
  EXPECT_FALSE(header_only.ok());
}

// CRC-32 (ISO-HDLC, as PNG chunks carry it), bit by bit: a patched header
// needs a new one.
uint32_t Crc32(const std::string& bytes) {
  uint32_t c = 0xffffffffu;
  for (unsigned char b : bytes) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
  }
  return c ^ 0xffffffffu;
}

void PutBe(std::string* s, size_t at, uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) {
    (*s)[at + i] = static_cast<char>(v >> (8 * (bytes - 1 - i)));
  }
}

// A few bytes can declare an image of many GB: a header over
// kMaxImagePixels is refused, naming the limit, before anything that size
// is allocated (a 2x2 PNG claiming 100000 x 100000 used to allocate 4 GB,
// its 32-bit PNG_IMAGE_SIZE wrapped; a JPEG claiming 65500 x 65500, 12 GB).
TEST(ImageCodecTest, HugeDeclaredSizeIsRefusedWithoutAllocating) {
  const std::string dir = TempDir("huge");
  WritePng(dir + "/small.png", Gradient(2, 2));
  std::string png = *ReadFile(dir + "/small.png");
  // The IHDR chunk: length at 8, "IHDR" at 12, width 16, height 20, CRC of
  // type + data at 29.
  ASSERT_EQ(png.substr(12, 4), "IHDR");
  PutBe(&png, 16, 100000, 4);
  PutBe(&png, 20, 100000, 4);
  PutBe(&png, 29, Crc32(png.substr(12, 17)), 4);
  absl::StatusOr<RgbImage> big_png = DecodeImage(png);
  ASSERT_FALSE(big_png.ok());
  EXPECT_EQ(big_png.status().message(),
            "PNG: 100000x100000 is 10000000000 pixels, over the limit of "
            "134217728 (kMaxImagePixels)");

  std::string jpeg = JpegBytes(Gradient(8, 8), 90);
  const size_t sof = jpeg.find("\xff\xc0");  // baseline SOF0
  ASSERT_NE(sof, std::string::npos);
  // FF C0, length (2), precision (1), height (2), width (2).
  PutBe(&jpeg, sof + 5, 65500, 2);
  PutBe(&jpeg, sof + 7, 65500, 2);
  absl::StatusOr<RgbImage> big_jpeg = DecodeImage(jpeg);
  ASSERT_FALSE(big_jpeg.ok());
  EXPECT_EQ(big_jpeg.status().message(),
            "JPEG: 65500x65500 is 4290250000 pixels, over the limit of "
            "134217728 (kMaxImagePixels)");

  // At the limit's scale but under it, the header passes and the missing
  // pixel data is what fails.
  PutBe(&jpeg, sof + 5, 8192, 2);
  PutBe(&jpeg, sof + 7, 16384, 2);
  absl::StatusOr<RgbImage> cut = DecodeImage(jpeg);
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().message().substr(0, 6), "JPEG: ");
  EXPECT_EQ(cut.status().message().find("kMaxImagePixels"),
            absl::string_view::npos);
}

TEST(ImageCodecTest, SampleTransform) {
  // A solid colour stays that colour at any size, under each preprocessing.
  const RgbImage red = Solid(3, 5, 255, 51, 0);
  std::vector<float> out(4 * 4 * 3);
  CropWindow whole{0, 0, 3, 5};
  ImageToSample(red, whole, false, 4, 4, ImagePreprocessing::kUnit,
                out.data());
  EXPECT_FLOAT_EQ(out[0], 1.0f);
  EXPECT_FLOAT_EQ(out[1], 0.2f);
  EXPECT_FLOAT_EQ(out[47], 0.0f);
  ImageToSample(red, whole, false, 4, 4, ImagePreprocessing::kMobilenet,
                out.data());
  EXPECT_FLOAT_EQ(out[0], 1.0f);
  EXPECT_FLOAT_EQ(out[2], -1.0f);
  ImageToSample(red, whole, false, 4, 4, ImagePreprocessing::kImagenet,
                out.data());
  EXPECT_NEAR(out[0], (1.0 - 0.485) / 0.229, 1e-5);
  EXPECT_NEAR(out[1], (0.2 - 0.456) / 0.224, 1e-5);
  EXPECT_NEAR(out[2], (0.0 - 0.406) / 0.225, 1e-5);

  // 1x2 -> 1x4 bilinear with half-pixel centres: source x = (i + .5)/2 - .5
  // = -0.25 (clamped 0), 0.25, 0.75, 1.25 (clamped 1): 0, 25.5, 76.5, 102.
  RgbImage two = Solid(1, 2, 0, 0, 0);
  two.pixels[3] = 102;
  std::vector<float> row(4 * 3);
  ImageToSample(two, {0, 0, 1, 2}, false, 1, 4, ImagePreprocessing::kUnit,
                row.data());
  EXPECT_FLOAT_EQ(row[0] * 255, 0.0f);
  EXPECT_FLOAT_EQ(row[3] * 255, 25.5f);
  EXPECT_FLOAT_EQ(row[6] * 255, 76.5f);
  EXPECT_FLOAT_EQ(row[9] * 255, 102.0f);
  // Flipped: mirrored left to right.
  ImageToSample(two, {0, 0, 1, 2}, true, 1, 4, ImagePreprocessing::kUnit,
                row.data());
  EXPECT_FLOAT_EQ(row[0] * 255, 102.0f);
  EXPECT_FLOAT_EQ(row[9] * 255, 0.0f);
  // A crop window: the right half of a 1x4 image [0, 40, 80, 120] at 1x2.
  RgbImage four = Solid(1, 4, 0, 0, 0);
  for (int i = 0; i < 4; ++i) four.pixels[3 * i] = static_cast<uint8_t>(40 * i);
  std::vector<float> half(2 * 3);
  ImageToSample(four, {0, 2, 1, 2}, false, 1, 2, ImagePreprocessing::kUnit,
                half.data());
  EXPECT_FLOAT_EQ(half[0] * 255, 80.0f);
  EXPECT_FLOAT_EQ(half[3] * 255, 120.0f);
}

}  // namespace
}  // namespace lockstep
