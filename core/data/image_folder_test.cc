// image_folder data and the image codec: JPEG and PNG files written here
// with libjpeg and libpng, decoded back; the sample transform (resize,
// crop, flip, preprocessing) against hand-computed values; the folder
// listing, splits, augmentation determinism, skipped files and errors.
#include "core/data/image_folder.h"

#include <jpeglib.h>
#include <png.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "core/data/image_codec.h"
#include "core/data/data_loader.h"
#include "core/data/image_folder_format.h"
#include "gtest/gtest.h"
#include "tests/png_writer.h"

namespace lockstep {
namespace {

RgbImage Gradient(int64_t h, int64_t w) {
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

RgbImage Solid(int64_t h, int64_t w, uint8_t r, uint8_t g, uint8_t b) {
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
std::string WritePngOf(const std::string& path, png_uint_32 format,
                       int64_t width, int64_t height,
                       const std::vector<uint8_t>& px) {
  testing::WritePngOf(path, format, width, height, px);
  return ReadFile(path).value_or("");
}

void WritePng(const std::string& path, const RgbImage& img) {
  WritePngOf(path, PNG_FORMAT_RGB, img.width, img.height, img.pixels);
}

// A JPEG of `components` channels in `space` (JCS_RGB, JCS_GRAYSCALE,
// JCS_CMYK), optionally progressive.
std::string JpegOf(int64_t width, int64_t height, int components,
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

std::string JpegBytes(const RgbImage& img, int quality) {
  return JpegOf(img.width, img.height, 3, JCS_RGB, img.pixels, quality);
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string TempDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  EXPECT_TRUE(MakeDirs(dir).ok());
  return dir;
}

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

// class folders "b_dog" and "a_cat" (labels by sorted name), a text file
// and a loose image that are ignored, 3 + 2 images.
std::string MakeFolder(const std::string& name) {
  const std::string dir = TempDir(name);
  EXPECT_TRUE(MakeDirs(dir + "/b_dog").ok());
  EXPECT_TRUE(MakeDirs(dir + "/a_cat").ok());
  WritePng(dir + "/a_cat/2.png", Solid(4, 4, 200, 0, 0));
  WritePng(dir + "/a_cat/1.PNG", Solid(6, 3, 100, 0, 0));
  WriteBytes(dir + "/a_cat/3.jpg", JpegBytes(Solid(8, 8, 50, 50, 50), 90));
  WritePng(dir + "/b_dog/x.png", Solid(5, 5, 0, 0, 200));
  WriteBytes(dir + "/b_dog/y.jpeg", JpegBytes(Gradient(9, 9), 90));
  WriteBytes(dir + "/b_dog/notes.txt", "not an image");
  WritePng(dir + "/loose.png", Solid(2, 2, 1, 2, 3));
  return dir;
}

ImageFolderConfig Spec(const std::string& train, const std::string& test) {
  ImageFolderConfig d;
  d.train_path = train;
  d.test_path = test;
  d.image_height = 4;
  d.image_width = 6;
  return d;
}

TEST(ImageFolderTest, ListsClassesAndFilesInOrder) {
  const std::string dir = MakeFolder("listing");
  absl::StatusOr<ImageFolderListing> l = ListImageFolder("data.x", dir);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->classes, (std::vector<std::string>{"a_cat", "b_dog"}));
  ASSERT_EQ(l->files.size(), 5u);
  EXPECT_EQ(l->files[0].path, dir + "/a_cat/1.PNG");
  EXPECT_EQ(l->files[2].path, dir + "/a_cat/3.jpg");
  EXPECT_EQ(l->files[2].label, 0);
  EXPECT_EQ(l->files[3].path, dir + "/b_dog/x.png");
  EXPECT_EQ(l->files[4].label, 1);
}

TEST(ImageFolderTest, SamplesLabelsAndTheTestSplit) {
  const std::string dir = MakeFolder("samples");
  ImageFolderConfig spec = Spec(dir, dir);
  spec.preprocessing = ImagePreprocessing::kUnit;
  absl::StatusOr<Dataset> train = LoadImageFolder(spec, Split::kTrain, 7);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(train->num_samples, 5);
  EXPECT_EQ(train->num_classes, 2);
  EXPECT_EQ(train->sample_shape, (Shape{4, 6, 3}));
  std::vector<float> x(4 * 6 * 3);
  int32_t label = 9;
  train->Fill(0, 1, x.data(), &label);  // a_cat/2.png: solid (200, 0, 0)
  EXPECT_EQ(label, 0);
  EXPECT_FLOAT_EQ(x[0], 200.0f / 255);
  EXPECT_FLOAT_EQ(x[x.size() - 3], 200.0f / 255);
  EXPECT_FLOAT_EQ(x[2], 0.0f);
  train->Fill(0, 3, x.data(), &label);  // b_dog/x.png
  EXPECT_EQ(label, 1);
  EXPECT_FLOAT_EQ(x[2], 200.0f / 255);
  absl::StatusOr<Dataset> test = LoadImageFolder(spec, Split::kTest, 7);
  ASSERT_TRUE(test.ok());
  EXPECT_EQ(test->num_samples, 5);

  // A test folder with other classes is refused.
  const std::string other = TempDir("other_classes");
  ASSERT_TRUE(MakeDirs(other + "/a_cat").ok());
  ASSERT_TRUE(MakeDirs(other + "/c_bird").ok());
  WritePng(other + "/a_cat/1.png", Solid(2, 2, 0, 0, 0));
  WritePng(other + "/c_bird/1.png", Solid(2, 2, 0, 0, 0));
  absl::StatusOr<Dataset> bad =
      LoadImageFolder(Spec(dir, other), Split::kTest, 7);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "data.test_path: \"" + other +
                "\" has classes [a_cat, c_bird] but data.train_path has "
                "[a_cat, b_dog]");
}

TEST(ImageFolderTest, AugmentationIsAPureFunctionOfSeedEpochAndSample) {
  const std::string dir = MakeFolder("augment");
  ImageFolderConfig spec = Spec(dir, dir);
  spec.random_flip = true;
  spec.random_crop = 0.5;
  absl::StatusOr<Dataset> a = LoadImageFolder(spec, Split::kTrain, 7);
  absl::StatusOr<Dataset> b = LoadImageFolder(spec, Split::kTrain, 7);
  ASSERT_TRUE(a.ok() && b.ok());
  const int64_t n = 4 * 6 * 3;
  std::vector<float> x(n), y(n);
  int32_t l = 0;
  std::set<std::vector<float>> seen;
  for (int64_t epoch = 0; epoch < 8; ++epoch) {
    a->Fill(epoch, 4, x.data(), &l);  // the gradient JPEG
    b->Fill(epoch, 4, y.data(), &l);
    EXPECT_EQ(x, y) << epoch;
    seen.insert(x);
  }
  EXPECT_GT(seen.size(), 4u);  // crops and flips differ across epochs
  // The test split is never augmented: the whole image every time.
  absl::StatusOr<Dataset> test = LoadImageFolder(spec, Split::kTest, 7);
  ASSERT_TRUE(test.ok());
  test->Fill(0, 4, x.data(), &l);
  test->Fill(5, 4, y.data(), &l);
  EXPECT_EQ(x, y);
}

TEST(ImageFolderTest, ValidationSplitIsSeededAndDisjoint) {
  const std::string dir = TempDir("valsplit");
  for (const char* c : {"a", "b"}) {
    ASSERT_TRUE(MakeDirs(dir + "/" + c).ok());
    for (int i = 0; i < 10; ++i) {
      WritePng(dir + "/" + c + "/" + std::to_string(i) + ".png",
               Solid(2, 2, static_cast<uint8_t>(i), 0, 0));
    }
  }
  ImageFolderConfig spec = Spec(dir, "");
  spec.validation_split = 0.25;
  absl::StatusOr<Dataset> train = LoadImageFolder(spec, Split::kTrain, 3);
  absl::StatusOr<Dataset> held = LoadImageFolder(spec, Split::kTest, 3);
  ASSERT_TRUE(train.ok() && held.ok());
  EXPECT_EQ(train->num_samples, 15);
  EXPECT_EQ(held->num_samples, 5);
  spec.validation_split = 0.01;
  absl::StatusOr<Dataset> none = LoadImageFolder(spec, Split::kTest, 3);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(),
            "data.validation_split: 0.01 of 20 images leaves nothing to hold "
            "out");
}

TEST(ImageFolderTest, DamagedImagesAreSkippedAndFoldersChecked) {
  const std::string dir = MakeFolder("damaged_folder");
  const std::string jpeg = JpegBytes(Gradient(32, 32), 90);
  WriteBytes(dir + "/b_dog/z_cut.jpg", jpeg.substr(0, jpeg.size() / 3));
  absl::StatusOr<Dataset> d = LoadImageFolder(Spec(dir, dir), Split::kTrain, 1);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->num_samples, 6);
  std::vector<float> x(4 * 6 * 3, 5.0f);
  int32_t label = 1;
  d->Fill(0, 5, x.data(), &label);
  EXPECT_EQ(label, -1);  // no label: nothing learned from it
  EXPECT_EQ(x, std::vector<float>(x.size(), 0.0f));
  d->Fill(1, 5, x.data(), &label);  // again: the same, warned once
  EXPECT_EQ(label, -1);

  absl::StatusOr<ImageFolderListing> missing =
      ListImageFolder("data.train_path", dir + "/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_EQ(missing.status().message(),
            "data.train_path: cannot open folder \"" + dir +
                "/nope\": No such file or directory");
  const std::string empty = TempDir("empty_classes");
  ASSERT_TRUE(MakeDirs(empty + "/a").ok());
  ASSERT_TRUE(MakeDirs(empty + "/b").ok());
  EXPECT_EQ(ListImageFolder("data.train_path", empty).status().message(),
            "data.train_path: \"" + empty +
                "\" has no images in class subfolders (expected one "
                "subfolder per class holding .jpg, .jpeg or .png files)");
  const std::string one = TempDir("one_class");
  ASSERT_TRUE(MakeDirs(one + "/only").ok());
  WritePng(one + "/only/1.png", Solid(2, 2, 0, 0, 0));
  EXPECT_EQ(ListImageFolder("data.train_path", one).status().message(),
            "data.train_path: \"" + one +
                "\" has one class (\"only\"); a classifier needs at least "
                "two class subfolders");
}

absl::StatusOr<DataSpec> ParseData(const std::string& text) {
  DataSpec spec;
  absl::Status s = ParseDataSpec(spec_reader::Json::parse(text), "", &spec);
  if (!s.ok()) return s;
  return spec;
}

TEST(ImageFolderTest, TheJobFileSide) {
  const std::string dir = MakeFolder("jobfile");
  absl::StatusOr<DataSpec> spec = ParseData(
      R"({"format": "image_folder", "train_path": ")" + dir + R"(",
          "validation_split": 0.4, "image_size": 32,
          "preprocessing": "mobilenet", "random_flip": true})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(*spec->config->FieldShape("input"), (Shape{32, 32, 3}));
  EXPECT_EQ(spec->config->FieldShape("token_ids").status().code(),
            absl::StatusCode::kNotFound);
  const ImageFolderConfig* images = spec->As<ImageFolderConfig>();
  ASSERT_NE(images, nullptr);
  EXPECT_EQ(images->preprocessing, ImagePreprocessing::kMobilenet);
  EXPECT_TRUE(images->random_flip);
  absl::StatusOr<Dataset> train = LoadDataset(*spec, Split::kTrain);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(train->num_samples, 3);
  // Canonical form round trip.
  const spec_reader::Json canonical = DataSpecToJson(*spec);
  EXPECT_EQ(canonical.dump(),
            R"({"format":"image_folder","train_path":")" + dir +
                R"(","validation_split":0.4,"image_size":[32,32],)"
                R"("preprocessing":"mobilenet","random_flip":true,)"
                R"("random_crop":1.0,"shuffle":true})");
  absl::StatusOr<DataSpec> again = ParseData(canonical.dump());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(*again == *spec);
  EXPECT_FALSE(*again == ImageFolderDataSpec(Spec(dir, dir)));

  auto error = [&](const std::string& data) {
    absl::StatusOr<DataSpec> s = ParseData(data);
    return s.ok() ? std::string() : std::string(s.status().message());
  };
  EXPECT_EQ(error(R"({"format": "image_folder", "train_path": "/a",
                      "image_size": 8})"),
            "data.test_path: give either test_path (a folder of the same "
            "class subfolders) or validation_split (a fraction of "
            "train_path held out), not both or neither");
  EXPECT_EQ(error(R"({"format": "image_folder", "train_path": "/a",
                      "test_path": "/b"})"),
            "data.image_size: required for format \"image_folder\"");
  EXPECT_EQ(error(R"({"format": "image_folder", "train_path": "/a",
                      "test_path": "/b", "image_size": 8,
                      "preprocessing": "caffe"})"),
            "data.preprocessing: unknown preprocessing \"caffe\"; expected "
            "one of unit, mobilenet, imagenet");
  EXPECT_EQ(error(R"({"format": "image_folder", "train_path": "/a",
                      "test_path": "/b", "image_size": 8,
                      "num_classes": 2})"),
            "data.num_classes: unknown field for format \"image_folder\"");
}

}  // namespace
}  // namespace lockstep
