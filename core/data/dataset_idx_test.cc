// IDX data (MNIST's format): raw and gzip files written here, loaded back;
// each malformed file (bad magic, truncated, trailing bytes, count
// mismatch, labels out of range, corrupt gzip, header sizes past 64 bits, a
// gzip bomb) an error naming the field and the file; real MNIST where
// $LOCKSTEP_MNIST_DIR has it.
#include "core/data/dataset.h"

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/data/data_file.h"
#include "core/data/data_loader.h"
#include "core/data/dataset_test_util.h"
#include "core/data/idx_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::ExpectError;
using testing::TempPath;
using testing::WriteRaw;

void WriteGzip(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  if (!bytes.empty()) {
    ASSERT_EQ(gzwrite(f, bytes.data(), bytes.size()),
              static_cast<int>(bytes.size()));
  }
  ASSERT_EQ(gzclose(f), Z_OK);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string Be32(uint32_t v) {
  return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                     static_cast<char>(v >> 8), static_cast<char>(v)};
}

// `count` images of rows x cols; pixel j of image i is (i * 7 + j) % 256.
std::string IdxImages(uint32_t count, uint32_t rows, uint32_t cols,
                      uint32_t magic = 0x00000803) {
  std::string s = Be32(magic) + Be32(count) + Be32(rows) + Be32(cols);
  for (uint32_t i = 0; i < count; ++i) {
    for (uint32_t j = 0; j < rows * cols; ++j) {
      s.push_back(static_cast<char>((i * 7 + j) % 256));
    }
  }
  return s;
}

std::string IdxLabels(const std::vector<uint8_t>& labels,
                      uint32_t magic = 0x00000801) {
  std::string s = Be32(magic) + Be32(labels.size());
  for (uint8_t l : labels) s.push_back(static_cast<char>(l));
  return s;
}

DataSpec IdxSpec(const std::string& images, const std::string& labels) {
  IdxConfig idx;
  idx.train_images = images;
  idx.train_labels = labels;
  DataSpec spec = IdxDataSpec(idx);
  spec.scale = 255.0;
  return spec;
}

TEST(IdxTest, LoadsRawAndGzipIdentically) {
  const std::string img = TempPath("raw-images"), lab = TempPath("raw-labels");
  const std::string gimg = TempPath("images.gz"), glab = TempPath("labels.gz");
  WriteRaw(img, IdxImages(3, 2, 3));
  WriteRaw(lab, IdxLabels({5, 0, 9}));
  WriteGzip(gimg, IdxImages(3, 2, 3));
  WriteGzip(glab, IdxLabels({5, 0, 9}));
  for (const auto& [i, l] :
       {std::make_pair(img, lab), {gimg, glab}, {gimg, lab}}) {
    absl::StatusOr<Dataset> d = LoadDataset(IdxSpec(i, l), Split::kTrain);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->sample_shape, (Shape{2, 3}));
    EXPECT_EQ(d->num_samples, 3);
    EXPECT_EQ(d->num_classes, 10);
    EXPECT_EQ(d->labels, (std::vector<int32_t>{5, 0, 9}));
    ASSERT_EQ(d->features.size(), 18u);
    EXPECT_FLOAT_EQ(d->features[0], 0.0f);
    EXPECT_FLOAT_EQ(d->features[1], 1.0f / 255);
    EXPECT_FLOAT_EQ(d->features[6 + 2], (7 + 2) / 255.0f);
    EXPECT_THAT(d->source, HasSubstr(i));
  }
}

TEST(IdxTest, TestSplitUsesTestFiles) {
  const std::string img = TempPath("t-images"), lab = TempPath("t-labels");
  WriteRaw(img, IdxImages(2, 1, 1));
  WriteRaw(lab, IdxLabels({1, 2}));
  IdxConfig idx;
  idx.test_images = img;
  idx.test_labels = lab;
  const DataSpec spec = IdxDataSpec(idx);
  absl::StatusOr<Dataset> d = LoadDataset(spec, Split::kTest);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->num_samples, 2);
  ExpectError(LoadDataset(spec, Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              "data.train_images: no file given");
}

TEST(IdxTest, MissingFileIsNotFound) {
  const std::string lab = TempPath("m-labels");
  WriteRaw(lab, IdxLabels({1}));
  ExpectError(LoadDataset(IdxSpec("/no/such/dir/images", lab), Split::kTrain),
              absl::StatusCode::kNotFound,
              "data.train_images: cannot open \"/no/such/dir/images\": No "
              "such file or directory");
  const std::string img = TempPath("m-images");
  WriteRaw(img, IdxImages(1, 2, 2));
  ExpectError(LoadDataset(IdxSpec(img, "/no/labels"), Split::kTrain),
              absl::StatusCode::kNotFound,
              "data.train_labels: cannot open \"/no/labels\": No such file or "
              "directory");
}

TEST(IdxTest, BadMagic) {
  const std::string img = TempPath("bm-images"), lab = TempPath("bm-labels");
  WriteRaw(img, IdxLabels({1, 2}));  // a label file given as images
  WriteRaw(lab, IdxLabels({1, 2}));
  ExpectError(LoadDataset(IdxSpec(img, lab), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_images: \"", img,
                           "\": not an IDX image file (magic 0x00000801, "
                           "expected 0x00000803)"));
  WriteRaw(img, IdxImages(2, 2, 2));
  WriteRaw(lab, IdxImages(2, 2, 2));
  ExpectError(LoadDataset(IdxSpec(img, lab), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_labels: \"", lab,
                           "\": not an IDX label file (magic 0x00000803, "
                           "expected 0x00000801)"));
}

TEST(IdxTest, Truncated) {
  const std::string img = TempPath("tr-images"), lab = TempPath("tr-labels");
  std::string bytes = IdxImages(60000, 28, 28).substr(0, 16 + 1234);
  WriteGzip(img, bytes);
  WriteRaw(lab, IdxLabels({1}));
  ExpectError(LoadDataset(IdxSpec(img, lab), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_images: \"", img,
                           "\": truncated: header says 60000 images of 28x28 "
                           "(47040000 bytes) but only 1234 bytes follow"));
  WriteRaw(img, IdxImages(1, 28, 28).substr(0, 10));
  ExpectError(LoadDataset(IdxSpec(img, lab), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_images: \"", img,
                           "\": truncated: only 10 bytes, an IDX image header "
                           "needs 16"));
  WriteRaw(img, "");
  ExpectError(LoadDataset(IdxSpec(img, lab), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_images: \"", img,
                           "\": truncated: only 0 bytes, an IDX image header "
                           "needs 16"));
  WriteRaw(img, IdxImages(3, 1, 1));
  WriteRaw(lab, IdxLabels({1, 2, 3}).substr(0, 9));
  ExpectError(LoadDataset(IdxSpec(img, lab), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_labels: \"", lab,
                           "\": truncated: header says 3 labels (3 bytes) but "
                           "only 1 bytes follow"));
}

TEST(IdxTest, TrailingGarbage) {
  const std::string img = TempPath("tg-images"), lab = TempPath("tg-labels");
  WriteRaw(img, IdxImages(2, 3, 3) + "xyz");
  WriteRaw(lab, IdxLabels({1, 2}));
  ExpectError(LoadDataset(IdxSpec(img, lab), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_images: \"", img,
                           "\": 3 bytes of trailing data after 2 images of "
                           "3x3"));
  WriteRaw(img, IdxImages(2, 3, 3));
  WriteRaw(lab, IdxLabels({1, 2}) + "!");
  ExpectError(LoadDataset(IdxSpec(img, lab), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_labels: \"", lab,
                           "\": 1 bytes of trailing data after 2 labels"));
}

TEST(IdxTest, CountMismatch) {
  const std::string img = TempPath("cm-images"), lab = TempPath("cm-labels");
  WriteRaw(img, IdxImages(3, 1, 2));
  WriteRaw(lab, IdxLabels({1, 2}));
  ExpectError(LoadDataset(IdxSpec(img, lab), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_labels: \"", lab,
                           "\" has 2 labels but \"", img, "\" has 3 images"));
}

TEST(IdxTest, LabelOutOfRange) {
  const std::string img = TempPath("lo-images"), lab = TempPath("lo-labels");
  WriteRaw(img, IdxImages(9, 1, 1));
  WriteRaw(lab, IdxLabels({0, 1, 2, 3, 4, 5, 6, 12, 8}));
  ExpectError(LoadDataset(IdxSpec(img, lab), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_labels: \"", lab,
                           "\": label 12 at index 7 is out of range [0, 10)"));
  DataSpec spec = IdxSpec(img, lab);
  spec.num_classes = 5;
  ExpectError(LoadDataset(spec, Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_labels: \"", lab,
                           "\": label 5 at index 5 is out of range [0, 5)"));
}

TEST(IdxTest, CorruptGzip) {
  const std::string img = TempPath("cg-images.gz"), lab = TempPath("cg-labels");
  WriteRaw(lab, IdxLabels({1, 2}));
  WriteGzip(img, IdxImages(2, 28, 28));
  const std::string good = ReadAll(img);

  // Cut short: the deflate stream never ends.
  WriteRaw(img, good.substr(0, good.size() / 2));
  ExpectError(LoadDataset(IdxSpec(img, lab), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_images: \"", img,
                           "\": corrupt gzip stream: unexpected end of file"));

  // Damaged trailer: the CRC does not match.
  std::string bad = good;
  bad[bad.size() - 6] ^= 0x55;
  WriteRaw(img, bad);
  absl::StatusOr<Dataset> d = LoadDataset(IdxSpec(img, lab), Split::kTrain);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(d.status().message()),
              StartsWith(absl::StrCat("data.train_images: \"", img,
                                      "\": corrupt gzip stream: ")));

  // Garbage in the header's flags/method byte.
  bad = good;
  bad[2] = 0x07;
  WriteRaw(img, bad);
  d = LoadDataset(IdxSpec(img, lab), Split::kTrain);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(d.status().message()),
              StartsWith(absl::StrCat("data.train_images: \"", img,
                                      "\": corrupt gzip stream: ")));
}

// A header's sizes multiply to more than 64 bits can hold: refused as
// truncated with the true byte count, never wrapped. 2 images of
// 3340214413x2761311370 are 2^64 + 4 bytes, which wrapped to the 4 bytes
// that follow and used to be accepted with a shape its features do not fill.
TEST(IdxTest, HugeHeaderSizesAreRefused) {
  const std::string img = TempPath("hh-images"), lab = TempPath("hh-labels");
  WriteRaw(lab, IdxLabels({1, 2}));
  WriteRaw(img,
           Be32(0x00000803) + Be32(1u << 31) + Be32(1u << 16) + Be32(1u << 16));
  ExpectError(LoadDataset(IdxSpec(img, lab), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_images: \"", img,
                           "\": truncated: header says 2147483648 images of "
                           "65536x65536 (9223372036854775808 bytes) but only 0 "
                           "bytes follow"));
  WriteRaw(img, Be32(0x00000803) + Be32(2) + Be32(3340214413u) +
                    Be32(2761311370u) + std::string(4, '\x01'));
  ExpectError(LoadDataset(IdxSpec(img, lab), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_images: \"", img,
                           "\": truncated: header says 2 images of "
                           "3340214413x2761311370 (18446744073709551620 "
                           "bytes) but only 4 bytes follow"));
}

// A gzip file that inflates past the limit (kMaxInflatedBytes, 4 GiB; a
// small one here) is refused, naming it, before its output is allocated;
// one at the limit loads.
TEST(IdxTest, GzipBombIsRefused) {
  const std::string img = TempPath("gb-images.gz");
  WriteGzip(img, IdxImages(2, 28, 28));  // inflates to 16 + 1568 bytes
  absl::StatusOr<std::string> over =
      ReadMaybeGzipFile("data.train_images", img, 1000);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(over.status().message(),
            absl::StrCat("data.train_images: \"", img,
                         "\": inflates to more than 1000 bytes, the limit "
                         "for a gzip-compressed data file (a raw file has "
                         "none: decompress it to load it)"));
  absl::StatusOr<std::string> at_limit =
      ReadMaybeGzipFile("data.train_images", img, 1584);
  ASSERT_TRUE(at_limit.ok()) << at_limit.status();
  EXPECT_EQ(*at_limit, IdxImages(2, 28, 28));
  EXPECT_EQ(kMaxInflatedBytes, int64_t{1} << 32);
}

TEST(MnistTest, RealFiles) {
  const char* dir = std::getenv("LOCKSTEP_MNIST_DIR");
  if (dir == nullptr || *dir == '\0') {
    GTEST_SKIP() << "LOCKSTEP_MNIST_DIR is not set; run with "
                    "--test_env=LOCKSTEP_MNIST_DIR=/path/to/mnist to load "
                    "real MNIST";
  }
  const std::string d = dir;
  IdxConfig idx;
  idx.train_images = d + "/train-images-idx3-ubyte.gz";
  idx.train_labels = d + "/train-labels-idx1-ubyte.gz";
  idx.test_images = d + "/t10k-images-idx3-ubyte.gz";
  idx.test_labels = d + "/t10k-labels-idx1-ubyte.gz";
  DataSpec spec = IdxDataSpec(idx);
  spec.scale = 255.0;
  if (!std::ifstream(idx.train_images).good()) {
    GTEST_SKIP() << "LOCKSTEP_MNIST_DIR=" << d << " has no "
                 << "train-images-idx3-ubyte.gz";
  }
  absl::StatusOr<Dataset> train = LoadDataset(spec, Split::kTrain);
  absl::StatusOr<Dataset> test = LoadDataset(spec, Split::kTest);
  ASSERT_TRUE(train.ok()) << train.status();
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(train->num_samples, 60000);
  EXPECT_EQ(test->num_samples, 10000);
  EXPECT_EQ(train->sample_shape, (Shape{28, 28}));
  EXPECT_EQ(train->labels[0], 5);
  EXPECT_EQ(test->labels[0], 7);
  for (const Dataset* ds : {&*train, &*test}) {
    std::vector<int64_t> hist(10, 0);
    for (int32_t l : ds->labels) ++hist[l];
    int64_t sum = 0;
    for (int64_t h : hist) {
      EXPECT_GT(h, ds->num_samples / 20);
      sum += h;
    }
    EXPECT_EQ(sum, ds->num_samples);
    float lo = 1, hi = 0;
    for (float v : ds->features) lo = std::min(lo, v), hi = std::max(hi, v);
    EXPECT_EQ(lo, 0.0f);
    EXPECT_EQ(hi, 1.0f);
  }
  // Known class counts of MNIST's training set.
  std::vector<int64_t> hist(10, 0);
  for (int32_t l : train->labels) ++hist[l];
  EXPECT_EQ(hist, (std::vector<int64_t>{5923, 6742, 5958, 6131, 5842, 5421,
                                        5918, 6265, 5851, 5949}));
}

}  // namespace
}  // namespace lockstep
