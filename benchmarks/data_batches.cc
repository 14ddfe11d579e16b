// Writes a job's samples exactly as lockstep trains on them, for a PyTorch
// peer that learns from the same batches (//benchmarks:bert_vs_pytorch,
// the causal-LM and image-folder tests): the train split once per epoch in
// that epoch's global order (the ShardPlan permutation every layout
// shares; text masks and image flips/crops drawn for that epoch) and the
// test split as evaluated.
//
//   data_batches JOB.json OUT_DIR EPOCHS
//
// OUT_DIR/meta.json names the fields and sizes; train_eK.x / train_eK.y and
// test.x / test.y are little-endian: x is [samples, sample values] (text:
// int32 token ids, the model inputs one after the other; otherwise float32
// as the model reads them, images [h, w, 3] as decoded), y is int32
// [samples, labels_per_sample] (1 for classes; max_predictions, or
// sequence_length for a causal_lm task; -1 where nothing is predicted).
#include <cstdint>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "core/data/data_loader.h"
#include "core/data/dataset.h"
#include "core/data/shard_plan.h"
#include "core/data/text_dataset.h"
#include "core/data/wordpiece.h"
#include "core/job/job_spec.h"
#include "core/tensor.h"

namespace lockstep {
namespace {

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()),
                     v.size() * sizeof(T));
}

// Samples `order` of `data` for `epoch`: inputs (int32 token ids for
// text, else float32) and int32 labels.
absl::Status WriteSplit(const Dataset& data, bool text, int64_t epoch,
                        const std::vector<int64_t>& order,
                        const std::string& prefix) {
  const int64_t per = NumElements(data.sample_shape);
  const int64_t p = data.labels_per_sample;
  std::vector<float> xs(order.size() * per);
  std::vector<int32_t> ys(order.size() * p);
  for (size_t i = 0; i < order.size(); ++i) {
    data.Fill(epoch, order[i], xs.data() + i * per, ys.data() + i * p);
  }
  if (text) {
    RETURN_IF_ERROR(WriteFileAtomic(
        prefix + ".x", Bytes(std::vector<int32_t>(xs.begin(), xs.end()))));
  } else {
    RETURN_IF_ERROR(WriteFileAtomic(prefix + ".x", Bytes(xs)));
  }
  return WriteFileAtomic(prefix + ".y", Bytes(ys));
}

absl::Status Run(const std::string& job_path, const std::string& out,
                 int64_t epochs) {
  ASSIGN_OR_RETURN(JobSpec spec, LoadJobSpec(job_path, ""));
  const TextConfig* text = spec.data.As<TextConfig>();
  ASSIGN_OR_RETURN(JobData data, LoadJobData(spec.data, DataOptionsFor(spec)));
  RETURN_IF_ERROR(MakeDirs(out));
  const ShardPlan plan(data.train.num_samples, spec.global_batch_size(),
                       spec.total_replicas(), spec.seed, spec.data.shuffle);
  for (int64_t e = 0; e < epochs; ++e) {
    RETURN_IF_ERROR(WriteSplit(data.train, text != nullptr, e,
                               plan.Permutation(e),
                               JoinPath(out, absl::StrCat("train_e", e))));
  }
  std::vector<int64_t> all(data.test.num_samples);
  for (int64_t i = 0; i < data.test.num_samples; ++i) all[i] = i;
  RETURN_IF_ERROR(WriteSplit(data.test, text != nullptr, kEvalEpoch, all,
                             JoinPath(out, "test")));
  nlohmann::ordered_json meta;
  meta["fields"] = DataOptionsFor(spec).fields;
  meta["x_dtype"] = text != nullptr ? "int32" : "float32";
  meta["sample_shape"] = data.train.sample_shape;
  meta["labels_per_sample"] = data.train.labels_per_sample;
  if (text != nullptr) {
    meta["sequence_length"] = text->sequence_length;
    meta["max_predictions"] = text->max_predictions;
    meta["task"] = text->causal ? "causal_lm" : "masked_lm";
    meta["vocab_size"] = data.train.vocab->size();
  } else {
    meta["num_classes"] = data.train.num_classes;
  }
  meta["train_samples"] = data.train.num_samples;
  meta["test_samples"] = data.test.num_samples;
  meta["sample_values"] = NumElements(data.train.sample_shape);
  meta["epochs"] = epochs;
  meta["global_batch"] = plan.global_batch_size();
  meta["steps_per_epoch"] = plan.steps_per_epoch();
  meta["train_source"] = data.train.source;
  return WriteFileAtomic(JoinPath(out, "meta.json"), meta.dump(1) + "\n");
}

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) {
  int64_t epochs = 0;
  if (argc != 4 || !absl::SimpleAtoi(argv[3], &epochs) || epochs < 1) {
    std::cerr << "usage: data_batches JOB.json OUT_DIR EPOCHS (>= 1)\n";
    return 2;
  }
  absl::Status s = lockstep::Run(argv[1], argv[2], epochs);
  if (!s.ok()) {
    std::cerr << "data_batches: " << s.message() << "\n";
    return 1;
  }
  return 0;
}
