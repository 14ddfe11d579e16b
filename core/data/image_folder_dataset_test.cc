// image_folder data: the folder listing, samples and labels, splits
// (a test folder, a seeded validation split), augmentation determinism,
// skipped files and errors, and the job file's "data" section.
#include "core/data/image_folder.h"

#include <cstdint>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/file_util.h"
#include "core/data/data_loader.h"
#include "core/data/image_folder_format.h"
#include "core/data/image_folder_test_util.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using testing::image::Gradient;
using testing::image::JpegBytes;
using testing::image::Solid;
using testing::image::TempDir;
using testing::image::WritePng;

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
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
