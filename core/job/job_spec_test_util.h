// What the job spec tests share: a full job file, the smallest valid one,
// and parsing that fails the test on an error.
#ifndef LOCKSTEP_CORE_JOB_JOB_SPEC_TEST_UTIL_H_
#define LOCKSTEP_CORE_JOB_JOB_SPEC_TEST_UTIL_H_

#include <string>

#include "core/job/job_spec.h"

namespace lockstep {
namespace testing {

// Every section, MNIST-shaped: conv2d, pooling, dense and dropout layers,
// a piecewise schedule, mnist_idx data (relative and absolute paths), a
// cluster of 2 workers x 4 replicas over NCCL.
inline constexpr char kFull[] = R"({
  "name": "mnist_cnn",
  "seed": 42,
  "model": {"input_shape": [28, 28, 1], "layers": [
      {"type": "conv2d", "filters": 32, "kernel_size": 3, "strides": 1,
       "padding": "valid", "activation": "relu"},
      {"type": "max_pool2d", "pool_size": 2},
      {"type": "conv2d", "filters": 8, "kernel_size": [3, 5],
       "strides": [1, 2], "padding": "same", "use_bias": false},
      {"type": "flatten"},
      {"type": "dense", "units": 64, "activation": "relu", "name": "hidden"},
      {"type": "dropout", "rate": 0.2},
      {"type": "dense", "units": 10, "activation": "softmax"}]},
  "loss": "sparse_categorical_crossentropy",
  "optimizer": {"type": "adam", "learning_rate": 0.001},
  "lr_schedule": {"type": "piecewise", "unit": "epoch", "boundaries": [3, 7],
                  "values": [1e-3, 1e-4, 1e-5], "warmup_steps": 0},
  "data": {"format": "mnist_idx", "train_images": "train-images.gz",
           "train_labels": "/abs/train-labels.gz",
           "test_images": "t10k-images.gz", "test_labels": "t10k-labels.gz",
           "scale": 255, "shuffle": true, "num_classes": 10},
  "batch_size_per_replica": 64,
  "epochs": 3,
  "checkpoint": {"every_steps": 500, "keep": 3},
  "summary": {"every_steps": 100},
  "cluster": {"workers": 2, "replicas_per_worker": 4, "collective": "nccl"}
})";

// The smallest valid job.
inline constexpr char kMinimal[] = R"({
  "name": "tiny",
  "model": {"input_shape": [4], "layers": [{"type": "dense", "units": 2}]},
  "data": {"format": "synthetic"},
  "steps": 10
})";

// The job `text` parses to (data paths relative to `base`); fails the test
// and returns a default JobSpec when it does not parse.
JobSpec MustParse(const std::string& text, const std::string& base = "");

}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_JOB_JOB_SPEC_TEST_UTIL_H_
