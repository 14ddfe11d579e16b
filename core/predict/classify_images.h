// `lockstep predict --image`: an image_folder job's model, restored from a
// checkpoint, classifies image files (decoded, resized and preprocessed as
// the job's test images are) and names the most likely classes with their
// probabilities (softmax over the logits; one sigmoid logit for a
// binary_crossentropy job).
#ifndef LOCKSTEP_CORE_PREDICT_CLASSIFY_IMAGES_H_
#define LOCKSTEP_CORE_PREDICT_CLASSIFY_IMAGES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/checkpoint.h"
#include "core/job/job_spec.h"

namespace lockstep {

struct ClassGuess {
  std::string label;  // the class folder's name
  double probability = 0;
};

struct ImagePrediction {
  std::string path;
  std::string error;               // why the file could not be read, or ""
  std::vector<ClassGuess> guesses;  // best first
};

struct ImageClassification {
  // Where the class names came from: data.train_path's folders, or
  // "class 0", "class 1", ... when that folder cannot be listed.
  std::string classes_source;
  std::vector<ImagePrediction> images;
};

// `paths` are image files or folders (every .jpg/.jpeg/.png in a folder,
// sorted). kInvalidArgument for a job whose data is not an image_folder, a
// path that is neither, or no image at all; kFailedPrecondition for a
// checkpoint of another model. A file that does not decode gets its error,
// not a failure of the rest.
absl::StatusOr<ImageClassification> ClassifyImages(
    const JobSpec& spec, const LoadedCheckpoint& checkpoint,
    const std::vector<std::string>& paths, int top_k);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_PREDICT_CLASSIFY_IMAGES_H_
