// The image_folder format (see image_folder_format.h).
#include "core/data/image_folder_format.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace lockstep {
namespace {

using spec_reader::Bad;
using spec_reader::kPositive;
using spec_reader::kUnitOpen;
using spec_reader::Reader;

const spec_reader::Table<ImagePreprocessing>& Preprocessings() {
  static const auto* t = new spec_reader::Table<ImagePreprocessing>{
      {"unit", ImagePreprocessing::kUnit},
      {"mobilenet", ImagePreprocessing::kMobilenet},
      {"imagenet", ImagePreprocessing::kImagenet}};
  return *t;
}

class ImageFolderData final : public DataConfig, public ImageFolderConfig {
 public:
  explicit ImageFolderData(ImageFolderConfig c)
      : ImageFolderConfig(std::move(c)) {}

  void ToJson(spec_reader::Json* d) const override {
    (*d)["train_path"] = train_path;
    if (validation_split > 0) {
      (*d)["validation_split"] = validation_split;
    } else {
      (*d)["test_path"] = test_path;
    }
    (*d)["image_size"] = {image_height, image_width};
    (*d)["preprocessing"] =
        spec_reader::NameOf(Preprocessings(), preprocessing);
    (*d)["random_flip"] = random_flip;
    (*d)["random_crop"] = random_crop;
  }
  std::vector<DataPath> Paths() const override {
    std::vector<DataPath> out = {{"data.train_path", train_path, true}};
    if (validation_split <= 0) {
      out.push_back({"data.test_path", test_path, true});
    }
    return out;
  }
  absl::StatusOr<Shape> FieldShape(const std::string& field) const override {
    if (field == "input") return Shape{image_height, image_width, 3};
    return DataConfig::FieldShape(field);
  }
  absl::StatusOr<Dataset> Load(const DataSpec& data, Split split,
                               const DataOptions& options) const override {
    RETURN_IF_ERROR(CheckOneInputField(options));
    return LoadImageFolder(*this, split, options.seed);
  }
};

absl::StatusOr<std::shared_ptr<const DataConfig>> Parse(
    const Reader& r, absl::string_view base_dir, const std::string& variant) {
  ImageFolderConfig c;
  RETURN_IF_ERROR(r.Require("train_path", variant));
  RETURN_IF_ERROR(r.Path("train_path", base_dir, &c.train_path));
  if (r.Has("test_path") == r.Has("validation_split")) {
    return Bad(r.At("test_path"),
               "give either test_path (a folder of the same class "
               "subfolders) or validation_split (a fraction of train_path "
               "held out), not both or neither");
  }
  if (r.Has("test_path")) {
    RETURN_IF_ERROR(r.Path("test_path", base_dir, &c.test_path));
  } else {
    RETURN_IF_ERROR(
        r.Number("validation_split", kUnitOpen, &c.validation_split));
    if (!(c.validation_split > 0)) {
      return Bad(r.At("validation_split"),
                 absl::StrCat("must be in (0, 1), got ", c.validation_split));
    }
  }
  RETURN_IF_ERROR(r.Require("image_size", variant));
  RETURN_IF_ERROR(r.Pair("image_size", &c.image_height, &c.image_width));
  if (c.image_height > 4096 || c.image_width > 4096) {
    return Bad(r.At("image_size"),
               absl::StrCat("at most 4096 x 4096, got [", c.image_height, ", ",
                            c.image_width, "]"));
  }
  RETURN_IF_ERROR(r.Enum("preprocessing", "preprocessing", Preprocessings(),
                         &c.preprocessing));
  RETURN_IF_ERROR(r.Bool("random_flip", &c.random_flip));
  RETURN_IF_ERROR(r.Number("random_crop", kPositive, &c.random_crop));
  if (c.random_crop > 1) {
    return Bad(r.At("random_crop"),
               absl::StrCat("a fraction of the image side in (0, 1], got ",
                            c.random_crop));
  }
  return std::make_shared<const ImageFolderData>(std::move(c));
}

DataFormatInfo Info() {
  return {"image_folder",
          {"train_path", "test_path", "validation_split", "image_size",
           "preprocessing", "random_flip", "random_crop"},
          false,
          &Parse};
}

}  // namespace

LOCKSTEP_REGISTER_DATA_FORMAT(Info());

DataSpec ImageFolderDataSpec(ImageFolderConfig config) {
  return MakeDataSpec("image_folder", std::make_shared<const ImageFolderData>(
                                          std::move(config)));
}

}  // namespace lockstep
