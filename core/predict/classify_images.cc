// Image classification with a restored model: decode as the data does, one
// inference forward, probabilities from the logits, the top k.
#include "core/predict/classify_images.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "core/data/image_codec.h"
#include "core/data/image_folder.h"
#include "core/model/model.h"
#include "core/train/checkpoint_restore.h"

namespace lockstep {
namespace {

// The files `path` names: itself, or a folder's images in name order.
absl::StatusOr<std::vector<std::string>> Expand(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--image: \"", path, "\" does not exist"));
  }
  if (!S_ISDIR(st.st_mode)) return std::vector<std::string>{path};
  return ImageFilesIn("--image", path);
}

}  // namespace

absl::StatusOr<ImageClassification> ClassifyImages(
    const JobSpec& spec, const LoadedCheckpoint& checkpoint,
    const std::vector<std::string>& paths, int top_k) {
  const ImageFolderConfig* images = spec.data.As<ImageFolderConfig>();
  if (images == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job ", spec.name,
        " does not classify images (data.format is not \"image_folder\")"));
  }
  ModelSpec model_spec = spec.model;
  model_spec.init_safetensors.clear();  // the checkpoint holds every weight
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                   Model::Build(model_spec, spec.seed));
  RETURN_IF_ERROR(ApplyCheckpointModel(checkpoint, model->params(),
                                       " (is it this job's checkpoint?)"));
  const Loss& loss = *spec.loss;
  const int64_t outputs = model->classes();
  const int64_t classes =
      loss.predicted_classes ? loss.predicted_classes(outputs) : outputs;
  ImageClassification result;
  std::vector<std::string> names;
  absl::StatusOr<ImageFolderListing> listing =
      ListImageFolder("data.train_path", images->train_path);
  if (listing.ok() &&
      static_cast<int64_t>(listing->classes.size()) == classes) {
    names = listing->classes;
    result.classes_source = images->train_path;
  } else {
    for (int64_t c = 0; c < classes; ++c) {
      names.push_back(absl::StrCat("class ", c));
    }
    result.classes_source = absl::StrCat(
        "class numbers (data.train_path: ",
        listing.ok() ? absl::StrCat(listing->classes.size(), " classes")
                     : std::string(listing.status().message()),
        ")");
  }
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    ASSIGN_OR_RETURN(std::vector<std::string> more, Expand(p));
    files.insert(files.end(), more.begin(), more.end());
  }
  if (files.empty()) {
    return absl::InvalidArgumentError("--image: no .jpg, .jpeg or .png file");
  }
  const int64_t h = images->image_height, w = images->image_width;
  const int k = static_cast<int>(std::min<int64_t>(top_k, classes));
  for (const std::string& f : files) {
    ImagePrediction pred;
    pred.path = f;
    absl::StatusOr<std::string> bytes = ReadFile(f);
    absl::StatusOr<RgbImage> image =
        bytes.ok() ? DecodeImage(*bytes) : bytes.status();
    if (!image.ok()) {
      pred.error = std::string(image.status().message());
      result.images.push_back(std::move(pred));
      continue;
    }
    Tensor x(Shape{1, h, w, 3});
    CropWindow whole;
    whole.height = static_cast<double>(image->height);
    whole.width = static_cast<double>(image->width);
    ImageToSample(*image, whole, false, h, w, images->preprocessing,
                  x.data());
    const float* logits = model->Logits(x);
    std::vector<double> prob(classes);
    if (loss.probabilities) {
      loss.probabilities(logits, outputs, prob.data());
    } else {
      const double max = *std::max_element(logits, logits + classes);
      double sum = 0;
      for (int64_t c = 0; c < classes; ++c) {
        prob[c] = std::exp(logits[c] - max);
        sum += prob[c];
      }
      for (double& p : prob) p /= sum;
    }
    std::vector<int64_t> order(classes);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return prob[a] > prob[b]; });
    for (int i = 0; i < k; ++i) {
      pred.guesses.push_back({names[order[i]], prob[order[i]]});
    }
    result.images.push_back(std::move(pred));
  }
  return result;
}

}  // namespace lockstep
