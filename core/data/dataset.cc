// Dispatch from DataSpec to the IDX, CSV, synthetic and text readers, and
// the per-sample access the batcher and evaluation use.
#include "core/data/image_folder.h"
#include "core/data/dataset.h"

#include <set>

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "core/data/csv_reader.h"
#include "core/data/idx_reader.h"
#include "core/data/synthetic_data.h"
#include "core/data/text_dataset.h"
#include "core/data/wordpiece.h"

namespace lockstep {

void Dataset::Fill(int64_t epoch, int64_t i, float* x, int32_t* out) const {
  if (maker != nullptr) {
    maker->Make(epoch, first_index + i, x, out);
    return;
  }
  const int64_t per = NumElements(sample_shape);
  std::memcpy(x, features.data() + i * per, sizeof(float) * per);
  std::memcpy(out, labels.data() + i * labels_per_sample,
              sizeof(int32_t) * labels_per_sample);
}

int64_t Dataset::LabelCount(int64_t i) const {
  return maker != nullptr ? maker->LabelCount(first_index + i)
                          : labels_per_sample;
}

Dataset Dataset::Slice(int64_t begin, int64_t end) const {
  Dataset out;
  out.sample_shape = sample_shape;
  out.num_classes = num_classes;
  out.labels_per_sample = labels_per_sample;
  out.num_samples = end - begin;
  out.maker = maker;
  out.vocab = vocab;
  out.first_index = first_index + begin;
  if (maker == nullptr) {
    const int64_t per = NumElements(sample_shape);
    out.features.assign(features.begin() + begin * per,
                        features.begin() + end * per);
    out.labels.assign(labels.begin() + begin * labels_per_sample,
                      labels.begin() + end * labels_per_sample);
  }
  out.source = absl::StrFormat("%s rows %d..%d", source, begin, end);
  return out;
}

DataOptions DataOptionsFor(const JobSpec& spec) {
  DataOptions o;
  o.fields.clear();
  for (const ModelInput& in : spec.model.inputs) o.fields.push_back(in.name);
  o.seed = spec.seed;
  return o;
}

absl::StatusOr<JobData> LoadJobData(const JobSpec& spec,
                                    const std::string& checkpoint_vocab,
                                    const std::string& checkpoint_path) {
  DataOptions options = DataOptionsFor(spec);
  if (!checkpoint_vocab.empty() && spec.data.format == DataFormat::kText) {
    ASSIGN_OR_RETURN(
        WordPieceVocab vocab,
        WordPieceVocab::FromText(checkpoint_vocab,
                                 JoinPath(checkpoint_path, "vocab.txt")));
    options.vocab = std::make_shared<const WordPieceVocab>(std::move(vocab));
  }
  JobData d;
  ASSIGN_OR_RETURN(d.train, LoadDataset(spec.data, Split::kTrain, options));
  options.vocab = d.train.vocab;
  ASSIGN_OR_RETURN(d.test, LoadDataset(spec.data, Split::kTest, options));
  return d;
}

std::string VocabText(const Dataset& train) {
  return train.vocab != nullptr ? train.vocab->ToText() : std::string();
}

absl::StatusOr<Dataset> LoadDataset(const DataSpec& spec, Split split,
                                    const DataOptions& options) {
  const bool train = split == Split::kTrain;
  if (spec.format == DataFormat::kText) {
    return LoadTextDataset(spec, split, options);
  }
  if (spec.format == DataFormat::kImageFolder) {
    if (options.fields.size() != 1 || options.fields[0] != "input") {
      return absl::InvalidArgumentError(
          "model.inputs: this data format has one field, \"input\"");
    }
    return LoadImageFolder(spec, split, options.seed);
  }
  if (options.fields.size() != 1 || options.fields[0] != "input") {
    return absl::InvalidArgumentError(
        "model.inputs: this data format has one field, \"input\"");
  }
  if (spec.num_classes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.num_classes: must be > 0, got ", spec.num_classes));
  }
  if (!(spec.scale > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.scale: must be > 0, got ", spec.scale));
  }
  switch (spec.format) {
    case DataFormat::kMnistIdx:
      return train ? ReadIdxDataset("data.train_images", spec.train_images,
                                    "data.train_labels", spec.train_labels,
                                    spec.num_classes, spec.scale)
                   : ReadIdxDataset("data.test_images", spec.test_images,
                                    "data.test_labels", spec.test_labels,
                                    spec.num_classes, spec.scale);
    case DataFormat::kCsv:
      return train
                 ? ReadCsvDataset("data.train_path", spec.train_path,
                                  spec.csv_header, spec.num_classes, spec.scale)
                 : ReadCsvDataset("data.test_path", spec.test_path,
                                  spec.csv_header, spec.num_classes,
                                  spec.scale);
    case DataFormat::kSynthetic:
      return MakeSyntheticDataset(
          spec.synthetic_seed, split,
          train ? spec.synthetic_train : spec.synthetic_test, spec.num_classes,
          spec.scale);
    case DataFormat::kText:
    case DataFormat::kImageFolder:
      break;
  }
  return absl::InternalError("unknown data.format");
}

std::vector<std::string> SkippedSamples(
    const std::vector<const Dataset*>& datasets) {
  std::set<std::string> names;
  for (const Dataset* d : datasets) {
    if (d->maker == nullptr) continue;
    for (std::string& n : d->maker->Skipped()) names.insert(std::move(n));
  }
  return std::vector<std::string>(names.begin(), names.end());
}

}  // namespace lockstep
