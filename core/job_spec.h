// The job description (README "Job file"): plain structs filled and
// validated by ParseJobSpec. Everything downstream trusts a parsed spec.
#ifndef LOCKSTEP_CORE_JOB_SPEC_H_
#define LOCKSTEP_CORE_JOB_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep {

enum class Activation { kLinear, kRelu, kTanh, kSigmoid, kSoftmax };
enum class LayerType { kDense, kConv2D, kMaxPool2D, kFlatten, kDropout };
enum class Padding { kValid, kSame };
enum class LossType { kSparseCategoricalCrossentropy, kMse };
enum class OptimizerType { kSgd, kAdam, kAdamW };
enum class ScheduleType { kConstant, kPiecewise, kPolynomial };
enum class ScheduleUnit { kStep, kEpoch };
enum class DataFormat { kMnistIdx, kCsv, kSynthetic };
enum class Collective { kRing, kNccl, kAuto };

struct LayerSpec {
  LayerType type = LayerType::kDense;
  std::string name;  // "dense_1" etc.; generated Keras-style when absent
  // dense
  int64_t units = 0;
  // conv2d
  int64_t filters = 0;
  int64_t kernel_h = 0, kernel_w = 0;
  int64_t stride_h = 1, stride_w = 1;
  Padding padding = Padding::kValid;
  // max_pool2d (strides default to the pool size, as Keras)
  int64_t pool_h = 2, pool_w = 2;
  // dense, conv2d
  Activation activation = Activation::kLinear;
  bool use_bias = true;
  // dropout
  double rate = 0.0;
};

struct ModelSpec {
  std::vector<int64_t> input_shape;  // per sample, e.g. [28, 28, 1] or [784]
  std::vector<LayerSpec> layers;
};

struct OptimizerSpec {
  OptimizerType type = OptimizerType::kAdam;
  double learning_rate = 1e-3;
  // sgd
  double momentum = 0.0;
  bool nesterov = false;
  // adam, adamw (Keras defaults)
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
  // adamw: decoupled weight decay (Keras default 0.004); sgd/adam: 0 = none
  double weight_decay = 0.0;
};

// Learning rate as a function of the global step (and epoch). Warm-up, when
// set, ramps linearly from 0 to the scheduled value over warmup_steps steps.
struct ScheduleSpec {
  ScheduleType type = ScheduleType::kConstant;
  ScheduleUnit unit = ScheduleUnit::kEpoch;  // piecewise boundaries
  std::vector<double> boundaries;            // piecewise: strictly increasing
  std::vector<double> values;  // piecewise: boundaries.size() + 1 values
  // polynomial: lr = (initial - end) * (1 - min(step, decay_steps) /
  // decay_steps)^power + end, initial = optimizer.learning_rate
  int64_t decay_steps = 0;
  double end_learning_rate = 1e-4;
  double power = 1.0;
  int64_t warmup_steps = 0;
};

struct DataSpec {
  DataFormat format = DataFormat::kSynthetic;
  std::string train_images, train_labels;  // mnist_idx (.gz or raw)
  std::string test_images, test_labels;
  std::string train_path, test_path;  // csv: label first, then features
  bool csv_header = false;            // csv: skip the first line
  double scale = 1.0;  // features are divided by this (255 for pixels)
  bool shuffle = true;
  int64_t num_classes = 10;
  // synthetic: a learnable classification task drawn from data.seed
  int64_t synthetic_train = 8192;
  int64_t synthetic_test = 2048;
  uint64_t synthetic_seed = 1234;
};

struct CheckpointSpec {
  int64_t every_steps = 0;  // 0: only at the end of each epoch
  int64_t keep = 3;
};

struct SummarySpec {
  int64_t every_steps = 100;
};

struct ClusterSpec {
  int64_t workers = 1;
  int64_t replicas_per_worker = 1;
  Collective collective = Collective::kRing;
  int64_t bucket_kib = 1024;  // gradients travel in buckets of >= this size
  // Workers compare parameter fingerprints every this many steps (0: only
  // at the end).
  int64_t fingerprint_every_steps = 100;
  // GPU replicas may run GEMMs and convolutions on TF32 tensor cores (FP32
  // accumulation, inputs rounded to 10 mantissa bits: several times faster,
  // about 1e-3 relative error). CPU replicas ignore it.
  bool allow_tf32 = false;
};

// What the coordinator does when a worker of the job is lost (DESIGN
// "Failure and rejoin").
struct RestartSpec {
  int64_t max_restarts = 3;    // generations started after a failure; 0: fail
  double backoff_seconds = 1;  // before restart k: backoff * 2^(k-1), <= 60 s
  // RECOVERING this long without enough workers: the job FAILS.
  double replacement_timeout_seconds = 120;
};

struct JobSpec {
  std::string name;
  uint64_t seed = 0;
  ModelSpec model;
  LossType loss = LossType::kSparseCategoricalCrossentropy;
  OptimizerSpec optimizer;
  ScheduleSpec lr_schedule;
  DataSpec data;
  int64_t batch_size_per_replica = 32;
  int64_t epochs = 0;  // exactly one of epochs / steps is > 0
  int64_t steps = 0;
  CheckpointSpec checkpoint;
  SummarySpec summary;
  ClusterSpec cluster;
  RestartSpec restart;

  int64_t total_replicas() const {
    return cluster.workers * cluster.replicas_per_worker;
  }
  int64_t global_batch_size() const {
    return batch_size_per_replica * total_replicas();
  }
};

// Field-by-field equality (ParseJobSpec(JobSpecToJson(s)) == s).
bool operator==(const LayerSpec& a, const LayerSpec& b);
bool operator==(const ModelSpec& a, const ModelSpec& b);
bool operator==(const OptimizerSpec& a, const OptimizerSpec& b);
bool operator==(const ScheduleSpec& a, const ScheduleSpec& b);
bool operator==(const DataSpec& a, const DataSpec& b);
bool operator==(const CheckpointSpec& a, const CheckpointSpec& b);
bool operator==(const SummarySpec& a, const SummarySpec& b);
bool operator==(const ClusterSpec& a, const ClusterSpec& b);
bool operator==(const RestartSpec& a, const RestartSpec& b);
bool operator==(const JobSpec& a, const JobSpec& b);
inline bool operator!=(const JobSpec& a, const JobSpec& b) { return !(a == b); }

// Parses and validates a job document. Errors are kInvalidArgument and name
// the field: "optimizer.learning_rate: must be > 0, got -1". Relative data
// paths are resolved against `base_dir` when it is non-empty.
absl::StatusOr<JobSpec> ParseJobSpec(absl::string_view json_text,
                                     absl::string_view base_dir = "");
// Reads `path` and parses it; a missing file or bad JSON names the file.
// Relative data paths are resolved against `data_dir` when given, else
// against the job file's folder.
absl::StatusOr<JobSpec> LoadJobSpec(const std::string& path,
                                    const std::string& data_dir = "");
// The canonical JSON form (all defaults filled): stored with checkpoints.
std::string JobSpecToJson(const JobSpec& spec);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_JOB_SPEC_H_
