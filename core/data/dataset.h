// A dataset in memory, as every data format loads it
// (core/data/data_format.h): stored samples, or a maker that computes each
// when it is batched (masked text, decoded images). Batching and sharding
// happen in ShardPlan / BatchPrefetcher.
#ifndef LOCKSTEP_CORE_DATA_DATASET_H_
#define LOCKSTEP_CORE_DATA_DATASET_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace lockstep {

class WordPieceVocab;

// The epoch evaluation samples are made for: masks drawn for it are the same
// at every evaluation, in every run and layout.
inline constexpr int64_t kEvalEpoch = -1;

// Samples computed when they are batched (a text sequence with its masks
// drawn for the epoch) instead of stored. Thread-safe (const).
class SampleMaker {
 public:
  virtual ~SampleMaker() = default;
  // Writes sample `index`'s values (NumElements(sample_shape)) and labels
  // (labels_per_sample, negative where there is none) for `epoch`: a pure
  // function of (seed, epoch, index).
  virtual void Make(int64_t epoch, int64_t index, float* x,
                    int32_t* labels) const = 0;
  // How many of sample `index`'s labels are set (the same every epoch).
  virtual int64_t LabelCount(int64_t index) const = 0;
  // The samples Make could not make so far (an image that does not
  // decode), by name (the file), sorted: each was written as zeros with no
  // label.
  virtual std::vector<std::string> Skipped() const { return {}; }
};

struct Dataset {
  // Per sample: mnist [rows, cols] (e.g. [28, 28]); csv [num_features];
  // synthetic SyntheticSampleShape() = [8, 8, 1] (core/data/synthetic_data.h).
  Shape sample_shape;
  int64_t num_samples = 0;
  int64_t num_classes = 0;  // DataSpec::num_classes; labels lie in [0, it)
  // num_samples * NumElements(sample_shape), row-major, already divided by
  // DataSpec::scale.
  std::vector<float> features;
  std::vector<int32_t> labels;  // num_samples
  // Human description: file paths, or "synthetic(seed=1234, n=8192)".
  std::string source;
  int64_t labels_per_sample = 1;  // text: max_predictions
  // Computed samples (text); null: features and labels hold them. Sample i
  // is the maker's sample first_index + i (a slice of a text dataset).
  std::shared_ptr<const SampleMaker> maker;
  int64_t first_index = 0;
  // Text: the vocabulary its token ids index.
  std::shared_ptr<const WordPieceVocab> vocab;

  const float* sample(int64_t i) const {
    return features.data() + i * NumElements(sample_shape);
  }
  // Sample i's values and labels for `epoch` (the stored ones, or the
  // maker's).
  void Fill(int64_t epoch, int64_t i, float* x, int32_t* labels) const;
  // Labels sample i has (1 for a stored dataset).
  int64_t LabelCount(int64_t i) const;
  // Samples [begin, end) as a dataset of their own (a worker's share of the
  // test set).
  Dataset Slice(int64_t begin, int64_t end) const;
};

enum class Split { kTrain, kTest };

// What a data format keeps beside a checkpoint (a text job's vocabulary:
// "vocab.txt"), by file name: the bytes a resumed run reads back.
using DataArtifacts = std::map<std::string, std::string>;

struct DataOptions {
  // The model's inputs, in order: a sample holds these data fields'
  // values one after the other ({"input"} for image and CSV data).
  std::vector<std::string> fields = {"input"};
  uint64_t seed = 0;  // the job's: text masks derive from it
  // Text: this vocabulary (the train split's, for the test split) instead
  // of a restored one, data.vocab or learning one.
  std::shared_ptr<const WordPieceVocab> vocab;
  // A checkpoint's artifacts (DataConfig::Artifacts): a resumed or
  // rejoined job reads its data as the run that wrote them did;
  // `restored_from` (the checkpoint's folder) names them in errors.
  DataArtifacts restored;
  std::string restored_from;
};

// The names of the samples the datasets' makers skipped (undecodable
// images), each once, sorted.
std::vector<std::string> SkippedSamples(
    const std::vector<const Dataset*>& datasets);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_DATA_DATASET_H_
