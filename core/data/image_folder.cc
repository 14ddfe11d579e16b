// image_folder: the listing at load, a SampleMaker that decodes on demand.
#include "core/data/image_folder.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "base/file_util.h"
#include "core/data/image_codec.h"
#include "core/random.h"

namespace lockstep {
namespace {

bool IsDir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Entry names of `dir` (no "." or ".."), sorted; errno on failure.
absl::StatusOr<std::vector<std::string>> Entries(const std::string& field,
                                                 const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    const int err = errno;
    const std::string why =
        absl::StrCat(field, ": cannot open folder \"", dir, "\": ",
                     std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(why)
                         : absl::InvalidArgumentError(why);
  }
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

class ImageFolderMaker : public SampleMaker {
 public:
  ImageFolderMaker(std::vector<ImageFile> files, const ImageFolderConfig& spec,
                   bool augment, uint64_t seed)
      : files_(std::move(files)),
        height_(spec.image_height),
        width_(spec.image_width),
        pre_(spec.preprocessing),
        flip_(augment && spec.random_flip),
        crop_(augment ? spec.random_crop : 1.0),
        seed_(seed) {}

  void Make(int64_t epoch, int64_t index, float* x,
            int32_t* labels) const override {
    const ImageFile& f = files_[index];
    absl::StatusOr<std::string> bytes = ReadFile(f.path);
    absl::StatusOr<RgbImage> image =
        bytes.ok() ? DecodeImage(*bytes) : bytes.status();
    if (!image.ok()) {
      std::fill(x, x + height_ * width_ * 3, 0.0f);
      labels[0] = -1;  // no label: adds nothing to loss or accuracy
      Skipped(f.path, image.status());
      return;
    }
    // The crop and flip: a pure function of (seed, epoch, sample).
    Rng rng(MixSeed(MixSeed(seed_, static_cast<uint64_t>(epoch)),
                    static_cast<uint64_t>(index)));
    CropWindow w;
    w.height = image->height * crop_;
    w.width = image->width * crop_;
    if (crop_ < 1.0) {
      w.top = rng.UniformDouble() * (image->height - w.height);
      w.left = rng.UniformDouble() * (image->width - w.width);
    }
    const bool flip = flip_ && rng.UniformInt(2) == 1;
    ImageToSample(*image, w, flip, height_, width_, pre_, x);
    labels[0] = f.label;
  }

  int64_t LabelCount(int64_t) const override { return 1; }
  std::vector<std::string> Skipped() const override {
    absl::MutexLock lock(&mu_);
    return std::vector<std::string>(skipped_.begin(), skipped_.end());
  }

 private:
  void Skipped(const std::string& path, const absl::Status& why) const {
    absl::MutexLock lock(&mu_);
    if (!skipped_.insert(path).second) return;
    std::fprintf(stderr,
                 "warning: data: skipped image \"%s\" (%s); %zu skipped so "
                 "far\n",
                 path.c_str(), std::string(why.message()).c_str(),
                 skipped_.size());
  }

  const std::vector<ImageFile> files_;
  const int64_t height_, width_;
  const ImagePreprocessing pre_;
  const bool flip_;
  const double crop_;
  const uint64_t seed_;
  mutable absl::Mutex mu_;
  mutable std::set<std::string> skipped_ ABSL_GUARDED_BY(mu_);
};

Dataset MakeDataset(std::vector<ImageFile> files, int64_t classes,
                    const ImageFolderConfig& spec, bool augment, uint64_t seed,
                    std::string source) {
  Dataset d;
  d.sample_shape = {spec.image_height, spec.image_width, 3};
  d.num_samples = static_cast<int64_t>(files.size());
  d.num_classes = classes;
  d.source = std::move(source);
  d.maker = std::make_shared<ImageFolderMaker>(std::move(files), spec,
                                               augment, seed);
  return d;
}

}  // namespace

bool IsImageFileName(const std::string& name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (const char* ext : {".jpg", ".jpeg", ".png"}) {
    const size_t n = std::strlen(ext);
    if (lower.size() > n && lower.compare(lower.size() - n, n, ext) == 0) {
      return true;
    }
  }
  return false;
}


absl::StatusOr<std::vector<std::string>> ImageFilesIn(const std::string& field,
                                                      const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> names = Entries(field, dir);
  if (!names.ok()) return names.status();
  std::vector<std::string> out;
  for (const std::string& n : *names) {
    if (IsImageFileName(n)) out.push_back(JoinPath(dir, n));
  }
  return out;
}

absl::StatusOr<ImageFolderListing> ListImageFolder(const std::string& field,
                                                   const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> top = Entries(field, dir);
  if (!top.ok()) return top.status();
  ImageFolderListing out;
  for (const std::string& name : *top) {
    const std::string sub = JoinPath(dir, name);
    if (!IsDir(sub)) continue;
    absl::StatusOr<std::vector<std::string>> files = ImageFilesIn(field, sub);
    if (!files.ok()) return files.status();
    const int32_t label = static_cast<int32_t>(out.classes.size());
    out.classes.push_back(name);
    for (std::string& f : *files) out.files.push_back({std::move(f), label});
  }
  if (out.files.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": \"", dir,
        "\" has no images in class subfolders (expected one subfolder per "
        "class holding .jpg, .jpeg or .png files)"));
  }
  if (out.classes.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": \"", dir, "\" has one class (\"", out.classes[0],
        "\"); a classifier needs at least two class subfolders"));
  }
  return out;
}

absl::StatusOr<Dataset> LoadImageFolder(const ImageFolderConfig& spec,
                                        Split split,
                                        uint64_t seed) {
  absl::StatusOr<ImageFolderListing> train =
      ListImageFolder("data.train_path", spec.train_path);
  if (!train.ok()) return train.status();
  const int64_t classes = static_cast<int64_t>(train->classes.size());
  const std::string class_list = absl::StrJoin(train->classes, ", ");
  if (spec.validation_split > 0) {
    // A seeded shuffle of every file; the last fraction is held out.
    std::vector<ImageFile> files = train->files;
    Rng rng(MixSeed(seed, 0x76616c6964ULL));  // "valid"
    for (size_t i = files.size(); i > 1; --i) {
      std::swap(files[i - 1], files[rng.UniformInt(i)]);
    }
    const size_t held = static_cast<size_t>(
        static_cast<double>(files.size()) * spec.validation_split + 0.5);
    if (held == 0 || held == files.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "data.validation_split: ", spec.validation_split, " of ",
          files.size(), " images leaves ",
          held == 0 ? "nothing to hold out" : "nothing to train on"));
    }
    const size_t cut = files.size() - held;
    const bool training = split == Split::kTrain;
    std::vector<ImageFile> part(
        training ? files.begin() : files.begin() + cut,
        training ? files.begin() + cut : files.end());
    const size_t n = part.size();
    return MakeDataset(
        std::move(part), classes, spec, training, seed,
        absl::StrCat(spec.train_path, " (", n, " images of ", classes,
                     " classes: ", class_list, "; ",
                     training ? "training" : "validation_split", ")"));
  }
  if (split == Split::kTrain) {
    const size_t n = train->files.size();
    return MakeDataset(std::move(train->files), classes, spec, true, seed,
                       absl::StrCat(spec.train_path, " (", n, " images of ",
                                    classes, " classes: ", class_list, ")"));
  }
  absl::StatusOr<ImageFolderListing> test =
      ListImageFolder("data.test_path", spec.test_path);
  if (!test.ok()) return test.status();
  if (test->classes != train->classes) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.test_path: \"", spec.test_path, "\" has classes [",
                     absl::StrJoin(test->classes, ", "),
                     "] but data.train_path has [", class_list, "]"));
  }
  const size_t n = test->files.size();
  return MakeDataset(std::move(test->files), classes, spec, false, seed,
                     absl::StrCat(spec.test_path, " (", n, " images of ",
                                  classes, " classes)"));
}

}  // namespace lockstep
