// Writes a text job's samples exactly as lockstep trains on them, for the
// PyTorch peer of //benchmarks:bert_vs_pytorch: the train split once per
// epoch in that epoch's global order (the ShardPlan permutation every
// layout shares, masks drawn for that epoch) and the test split with its
// evaluation masks. Both sides then learn from the same batches.
//
//   text_batches JOB.json OUT_DIR EPOCHS
//
// OUT_DIR/meta.json names the fields and sizes; train_eK.x / train_eK.y and
// test.x / test.y are little-endian int32: x is [samples, sum of the
// fields' sizes] (the model inputs one after the other), y is [samples,
// labels_per_sample] (max_predictions, or sequence_length for a causal_lm
// task; -1 where nothing is predicted).
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

// Samples `order` of `data` for `epoch` as int32 inputs and labels.
absl::Status WriteSplit(const Dataset& data, int64_t epoch,
                        const std::vector<int64_t>& order,
                        const std::string& prefix) {
  const int64_t per = NumElements(data.sample_shape);
  const int64_t p = data.labels_per_sample;
  std::vector<float> x(per);
  std::vector<int32_t> xs, ys(order.size() * p);
  xs.reserve(order.size() * per);
  for (size_t i = 0; i < order.size(); ++i) {
    data.Fill(epoch, order[i], x.data(), ys.data() + i * p);
    for (float v : x) xs.push_back(static_cast<int32_t>(v));
  }
  RETURN_IF_ERROR(WriteFileAtomic(
      prefix + ".x", std::string(reinterpret_cast<const char*>(xs.data()),
                                 xs.size() * sizeof(int32_t))));
  return WriteFileAtomic(
      prefix + ".y", std::string(reinterpret_cast<const char*>(ys.data()),
                                 ys.size() * sizeof(int32_t)));
}

absl::Status Run(const std::string& job_path, const std::string& out,
                 int64_t epochs) {
  ASSIGN_OR_RETURN(JobSpec spec, LoadJobSpec(job_path, ""));
  const TextConfig* text = spec.data.As<TextConfig>();
  if (text == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(job_path, ": not a text job (data.format)"));
  }
  ASSIGN_OR_RETURN(JobData data, LoadJobData(spec.data, DataOptionsFor(spec), "", ""));
  RETURN_IF_ERROR(MakeDirs(out));
  const ShardPlan plan(data.train.num_samples, spec.global_batch_size(),
                       spec.total_replicas(), spec.seed, spec.data.shuffle);
  for (int64_t e = 0; e < epochs; ++e) {
    RETURN_IF_ERROR(WriteSplit(data.train, e, plan.Permutation(e),
                               JoinPath(out, absl::StrCat("train_e", e))));
  }
  std::vector<int64_t> all(data.test.num_samples);
  for (int64_t i = 0; i < data.test.num_samples; ++i) all[i] = i;
  RETURN_IF_ERROR(WriteSplit(data.test, kEvalEpoch, all, JoinPath(out, "test")));
  nlohmann::ordered_json meta;
  meta["fields"] = DataOptionsFor(spec).fields;
  meta["sequence_length"] = text->sequence_length;
  meta["max_predictions"] = text->max_predictions;
  meta["labels_per_sample"] = data.train.labels_per_sample;
  meta["task"] = text->causal ? "causal_lm" : "masked_lm";
  meta["vocab_size"] = data.train.vocab->size();
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
    std::cerr << "usage: text_batches JOB.json OUT_DIR EPOCHS (>= 1)\n";
    return 2;
  }
  absl::Status s = lockstep::Run(argv[1], argv[2], epochs);
  if (!s.ok()) {
    std::cerr << "text_batches: " << s.message() << "\n";
    return 1;
  }
  return 0;
}
