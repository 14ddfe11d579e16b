// "format": "image_folder": one subfolder per class (Keras'
// image_dataset_from_directory, torchvision's ImageFolder), class i the
// i-th name in sorted order, JPEG and PNG files (by extension: .jpg, .jpeg,
// .png, any case; other files are ignored). Nothing is decoded at load:
// samples are made when batched, on the prefetch thread (a SampleMaker):
// the file is read and decoded (core/data/image_codec.h), a random crop and flip
// drawn from (job seed, epoch, sample) for training (never for the test
// split), resized to data.image_size and preprocessed.
//
// The held-out split is a second folder (data.test_path, the same classes)
// or a fraction of train_path (data.validation_split: a seeded shuffle of
// the files, the last fraction of it held out).
//
// A file that fails to decode (truncated, corrupt, not an image) is
// skipped: its sample is all zeros with no label (it adds nothing to the
// loss, the gradients or the accuracy), and a warning naming it is printed
// once per file. A folder that is missing, has no images, or has one class
// is an error.
#ifndef LOCKSTEP_CORE_DATA_IMAGE_FOLDER_H_
#define LOCKSTEP_CORE_DATA_IMAGE_FOLDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/data/dataset.h"
#include "core/data/image_codec.h"

namespace lockstep {

// The image_folder format's fields (core/data/image_folder_format.h parses
// them).
struct ImageFolderConfig {
  std::string train_path, test_path;  // folders of class subfolders
  double validation_split = 0;        // held out of train_path instead
  int64_t image_height = 0, image_width = 0;
  ImagePreprocessing preprocessing = ImagePreprocessing::kUnit;
  bool random_flip = false;  // training samples only
  double random_crop = 1.0;  // side fraction of a random crop; 1: none
};

struct ImageFile {
  std::string path;
  int32_t label = 0;
};

// A file image_folder reads: .jpg, .jpeg or .png, any case.
bool IsImageFileName(const std::string& name);
// The paths of the image files in folder `dir`, sorted by name; `field`
// names it in errors (kNotFound for a missing folder).
absl::StatusOr<std::vector<std::string>> ImageFilesIn(const std::string& field,
                                                      const std::string& dir);

// The class folders under `dir` (sorted) and their image files (sorted by
// name within a class). `field` names the path in errors
// ("data.train_path").
struct ImageFolderListing {
  std::vector<std::string> classes;
  std::vector<ImageFile> files;
};
absl::StatusOr<ImageFolderListing> ListImageFolder(const std::string& field,
                                                   const std::string& dir);

// The split of `spec` (format image_folder); `seed` is the job's (the
// crops, flips and the validation_split shuffle derive from it).
absl::StatusOr<Dataset> LoadImageFolder(const ImageFolderConfig& spec,
                                        Split split,
                                        uint64_t seed);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_DATA_IMAGE_FOLDER_H_
