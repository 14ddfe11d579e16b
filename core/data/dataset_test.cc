#include "core/data/dataset.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/data/csv_format.h"
#include "core/data/data_loader.h"
#include "core/data/idx_format.h"
#include "core/data/synthetic_data.h"
#include "core/data/synthetic_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

void WriteRaw(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), bytes.size());
  ASSERT_TRUE(out.good()) << path;
}

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

void ExpectError(const absl::StatusOr<Dataset>& got, absl::StatusCode code,
                 const std::string& message) {
  ASSERT_FALSE(got.ok()) << "expected: " << message;
  EXPECT_EQ(got.status().code(), code) << got.status();
  EXPECT_EQ(got.status().message(), message);
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
              absl::StatusCode::kDataLoss,
              absl::StrCat("data.train_images: \"", img,
                           "\": corrupt gzip stream: unexpected end of file"));

  // Damaged trailer: the CRC does not match.
  std::string bad = good;
  bad[bad.size() - 6] ^= 0x55;
  WriteRaw(img, bad);
  absl::StatusOr<Dataset> d = LoadDataset(IdxSpec(img, lab), Split::kTrain);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(d.status().message()),
              StartsWith(absl::StrCat("data.train_images: \"", img,
                                      "\": corrupt gzip stream: ")));

  // Garbage in the header's flags/method byte.
  bad = good;
  bad[2] = 0x07;
  WriteRaw(img, bad);
  d = LoadDataset(IdxSpec(img, lab), Split::kTrain);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(d.status().message()),
              StartsWith(absl::StrCat("data.train_images: \"", img,
                                      "\": corrupt gzip stream: ")));
}

DataSpec CsvSpec(const std::string& path, bool header = false,
                 const std::string& test_path = "") {
  CsvConfig csv;
  csv.train_path = path;
  csv.test_path = test_path;
  csv.header = header;
  DataSpec spec = CsvDataSpec(csv);
  return spec;
}

TEST(CsvTest, LoadsRowsWithHeaderAndCrlf) {
  const std::string path = TempPath("ok.csv");
  WriteRaw(path, "label,a,b,c\r\n3, 1.5,2,-4\r\n0,0,0,1e2\r\n\r\n");
  DataSpec spec = CsvSpec(path, /*header=*/true);
  spec.scale = 2.0;
  absl::StatusOr<Dataset> d = LoadDataset(spec, Split::kTrain);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->sample_shape, (Shape{3}));
  EXPECT_EQ(d->num_samples, 2);
  EXPECT_EQ(d->labels, (std::vector<int32_t>{3, 0}));
  EXPECT_EQ(d->features, (std::vector<float>{0.75f, 1, -2, 0, 0, 50}));
  EXPECT_EQ(d->source, path);
}

TEST(CsvTest, WrongWidth) {
  const std::string path = TempPath("width.csv");
  std::string text;
  for (int line = 0; line < 3; ++line) {
    text += "1";
    for (int f = 0; f < 784; ++f) text += ",0";
    text += "\n";
  }
  text += "1,2,3\n";
  WriteRaw(path, text);
  ExpectError(LoadDataset(CsvSpec(path), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_path: \"", path,
                           "\":4: expected 785 fields, got 3"));
}

TEST(CsvTest, NotANumber) {
  const std::string path = TempPath("nan.csv");
  WriteRaw(path, "1,2,3,4,5\n2,0,0,0,abc\n");
  ExpectError(LoadDataset(CsvSpec(path), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_path: \"", path,
                           "\":2: field 5: not a number: \"abc\""));
  WriteRaw(path, "1,2\n2,\n");
  ExpectError(LoadDataset(CsvSpec(path), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_path: \"", path,
                           "\":2: field 2: not a number: \"\""));
  WriteRaw(path, "1,inf\n");
  ExpectError(LoadDataset(CsvSpec(path), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_path: \"", path,
                           "\":1: field 2: not a finite number: \"inf\""));
}

TEST(CsvTest, BadLabels) {
  const std::string path = TempPath("labels.csv");
  WriteRaw(path, "h1,h2\n1,2\n2.5,3\n");
  ExpectError(LoadDataset(CsvSpec(path, true), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_path: \"", path,
                           "\":3: field 1: label is not an integer: \"2.5\""));
  WriteRaw(path, "1,2\n10,3\n");
  ExpectError(LoadDataset(CsvSpec(path), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_path: \"", path,
                           "\":2: label 10 is out of range [0, 10)"));
  WriteRaw(path, "-1,2\n");
  ExpectError(LoadDataset(CsvSpec(path), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_path: \"", path,
                           "\":1: label -1 is out of range [0, 10)"));
  WriteRaw(path, "7\n");
  ExpectError(LoadDataset(CsvSpec(path), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_path: \"", path,
                           "\":1: expected a label and at least one feature, "
                           "got 1 field"));
}

TEST(CsvTest, EmptyAndMissing) {
  const std::string path = TempPath("empty.csv");
  WriteRaw(path, "");
  ExpectError(LoadDataset(CsvSpec(path), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_path: \"", path, "\": no data rows"));
  WriteRaw(path, "label,x\n\n");
  ExpectError(LoadDataset(CsvSpec(path, true), Split::kTrain),
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("data.train_path: \"", path,
                           "\": no data rows (after the header line)"));
  const DataSpec spec = CsvSpec("", false, "/nope.csv");
  ExpectError(LoadDataset(spec, Split::kTest), absl::StatusCode::kNotFound,
              "data.test_path: cannot open \"/nope.csv\": No such file or "
              "directory");
}

TEST(SyntheticTest, ShapeSizesAndDeterminism) {
  DataSpec spec = SyntheticDataSpec();
  absl::StatusOr<Dataset> train = LoadDataset(spec, Split::kTrain);
  absl::StatusOr<Dataset> train2 = LoadDataset(spec, Split::kTrain);
  absl::StatusOr<Dataset> test = LoadDataset(spec, Split::kTest);
  ASSERT_TRUE(train.ok() && train2.ok() && test.ok());
  EXPECT_EQ(train->sample_shape, SyntheticSampleShape());
  EXPECT_EQ(train->sample_shape, (Shape{8, 8, 1}));
  EXPECT_EQ(train->num_samples, 8192);
  EXPECT_EQ(test->num_samples, 2048);
  EXPECT_EQ(train->num_classes, 10);
  EXPECT_EQ(train->features.size(), 8192u * 64);
  EXPECT_EQ(train->source, "synthetic(seed=1234, n=8192, train)");
  EXPECT_EQ(train->features, train2->features);
  EXPECT_EQ(train->labels, train2->labels);
  EXPECT_NE(
      std::vector<float>(train->features.begin(), train->features.begin() + 64),
      std::vector<float>(test->features.begin(), test->features.begin() + 64));
  std::vector<int> hist(10, 0);
  for (int32_t l : train->labels) {
    ASSERT_GE(l, 0);
    ASSERT_LT(l, 10);
    ++hist[l];
  }
  for (int h : hist) EXPECT_NEAR(h, 819, 120);
  for (float v : train->features)
    ASSERT_TRUE(std::isfinite(v) && std::abs(v) <= 1);

  // A prefix of a larger set equals the smaller set; another seed differs.
  SyntheticConfig synthetic;
  synthetic.train_samples = 100;
  absl::StatusOr<Dataset> small =
      LoadDataset(SyntheticDataSpec(synthetic), Split::kTrain);
  ASSERT_TRUE(small.ok());
  EXPECT_TRUE(std::equal(small->features.begin(), small->features.end(),
                         train->features.begin()));
  synthetic.seed = 99;
  absl::StatusOr<Dataset> other =
      LoadDataset(SyntheticDataSpec(synthetic), Split::kTrain);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->features, small->features);
}

TEST(SyntheticTest, LearnableButNotTrivial) {
  // Nearest class mean, fitted on train and scored on test: a crude linear
  // classifier (about 0.97 with the defaults; chance is 0.1), so a small MLP
  // has room to pass 0.9.
  const DataSpec spec = SyntheticDataSpec();
  absl::StatusOr<Dataset> train = LoadDataset(spec, Split::kTrain);
  absl::StatusOr<Dataset> test = LoadDataset(spec, Split::kTest);
  ASSERT_TRUE(train.ok() && test.ok());
  const int64_t per = 64, classes = 10;
  std::vector<double> mean(classes * per, 0.0);
  std::vector<int64_t> count(classes, 0);
  for (int64_t i = 0; i < train->num_samples; ++i) {
    const int32_t c = train->labels[i];
    ++count[c];
    for (int64_t k = 0; k < per; ++k) {
      mean[c * per + k] += train->features[i * per + k];
    }
  }
  for (int64_t c = 0; c < classes; ++c) {
    for (int64_t k = 0; k < per; ++k) mean[c * per + k] /= count[c];
  }
  int64_t correct = 0;
  for (int64_t i = 0; i < test->num_samples; ++i) {
    int64_t best = -1;
    double best_d = 0;
    for (int64_t c = 0; c < classes; ++c) {
      double d = 0;
      for (int64_t k = 0; k < per; ++k) {
        const double diff = test->features[i * per + k] - mean[c * per + k];
        d += diff * diff;
      }
      if (best < 0 || d < best_d) best = c, best_d = d;
    }
    correct += best == test->labels[i];
  }
  const double accuracy = static_cast<double>(correct) / test->num_samples;
  std::cout << "nearest-class-mean test accuracy: " << accuracy << "\n";
  EXPECT_GT(accuracy, 0.9);
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
