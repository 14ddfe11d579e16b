// Loading a job's data through its format (core/data/data_format.h): the
// train and test splits, the test split tokenized with the train split's
// vocabulary, or a checkpoint's. Above every format; no reader includes it.
#ifndef LOCKSTEP_CORE_DATA_DATA_LOADER_H_
#define LOCKSTEP_CORE_DATA_DATA_LOADER_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/data/data_format.h"
#include "core/data/dataset.h"

namespace lockstep {

// The split `split` of `data`. InvalidArgument when the spec has no
// format's config; otherwise the format's errors (DataConfig::Load).
absl::StatusOr<Dataset> LoadDataset(const DataSpec& data, Split split,
                                    const DataOptions& options = {});

// A job's train and test splits (the test split with the train split's
// vocabulary). `checkpoint_vocab` is a checkpoint's vocab.txt text
// (CheckpointState::vocab; empty for none): when set, text data uses it
// instead of data.vocab or learning one, so a resumed or rejoined job
// tokenizes exactly as the run that wrote the checkpoint;
// `checkpoint_path` names it in errors.
struct JobData {
  Dataset train, test;
};
absl::StatusOr<JobData> LoadJobData(const DataSpec& data, DataOptions options,
                                    const std::string& checkpoint_vocab,
                                    const std::string& checkpoint_path);

// What a checkpoint records of `train`'s vocabulary: its vocab.txt text,
// empty for data without one.
std::string VocabText(const Dataset& train);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_DATA_DATA_LOADER_H_
