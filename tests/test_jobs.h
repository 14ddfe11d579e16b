// Job files shared by the multi-process tests.
#ifndef LOCKSTEP_TESTS_TEST_JOBS_H_
#define LOCKSTEP_TESTS_TEST_JOBS_H_

#include <nlohmann/json.hpp>

namespace lockstep {
namespace testing {

// A small MLP on the built-in synthetic data; `extra` is merged on top.
inline nlohmann::json TinyJob(const nlohmann::json& extra = {}) {
  nlohmann::json job = nlohmann::json::parse(R"({
    "name": "tiny",
    "seed": 7,
    "model": {"input_shape": [8, 8, 1], "layers": [
      {"type": "flatten"},
      {"type": "dense", "units": 32, "activation": "relu"},
      {"type": "dropout", "rate": 0.1},
      {"type": "dense", "units": 10}]},
    "loss": "sparse_categorical_crossentropy",
    "optimizer": {"type": "adam", "learning_rate": 0.003},
    "data": {"format": "synthetic", "train_samples": 1000,
             "test_samples": 400, "seed": 3},
    "batch_size_per_replica": 16,
    "epochs": 3,
    "checkpoint": {"every_steps": 20, "keep": 3},
    "summary": {"every_steps": 10}
  })");
  if (!extra.is_null()) job.merge_patch(extra);
  return job;
}

}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_TESTS_TEST_JOBS_H_
