// What the PyTorch agreement tests share: whether /usr/bin/python3 has
// torch, reading the reference's safetensors files, and the error measures.
#ifndef LOCKSTEP_TESTS_TORCH_UTIL_H_
#define LOCKSTEP_TESTS_TORCH_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/checkpoint/safetensors.h"
#include "core/tensor.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"

namespace lockstep {
namespace testing {

// Empty when /usr/bin/python3 imports torch; else why the test skips.
inline std::string TorchMissing() {
  const std::string dir = NewTempDir("torch_probe");
  RunResult r = RunProcess({"/usr/bin/python3", "-c", "import torch"}, dir, 60);
  if (r.exit.exited && r.exit.exit_code == 0) return "";
  return "python3-torch is not installed for /usr/bin/python3 "
         "(scripts/install_deps.sh installs it)";
}

// Whether a missing torch fails the test instead of skipping it: the
// README's test command (scripts/test.sh) installs torch and sets
// LOCKSTEP_REQUIRE_TORCH=1, so there a failed import is a defect.
inline bool TorchRequired() {
  const char* v = std::getenv("LOCKSTEP_REQUIRE_TORCH");
  return v != nullptr && std::string(v) == "1";
}

}  // namespace testing
}  // namespace lockstep

// In a test body: skips (or, under LOCKSTEP_REQUIRE_TORCH=1, fails) when
// `missing` (TorchMissing() or the like) says what /usr/bin/python3 lacks.
#define LOCKSTEP_SKIP_OR_FAIL_IF_MISSING(missing)                        \
  do {                                                                   \
    const std::string lockstep_torch_missing = (missing);                \
    if (!lockstep_torch_missing.empty()) {                               \
      if (::lockstep::testing::TorchRequired()) {                        \
        FAIL() << lockstep_torch_missing                                 \
               << " (LOCKSTEP_REQUIRE_TORCH=1: the test command installs " \
                  "it, so this must not skip)";                          \
      }                                                                  \
      GTEST_SKIP() << lockstep_torch_missing;                            \
    }                                                                    \
  } while (0)

namespace lockstep {
namespace testing {

// Every tensor of a safetensors file, by name (any float dtype widened).
inline std::map<std::string, Tensor> ReadTensors(const std::string& path) {
  SafetensorsReadOptions options;
  options.any_dtype = true;
  absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> t =
      ReadSafetensors(path, nullptr, options);
  EXPECT_TRUE(t.ok()) << t.status();
  std::map<std::string, Tensor> out;
  if (t.ok()) {
    for (auto& [name, tensor] : *t) out.emplace(name, std::move(tensor));
  }
  return out;
}

// A reference's labels (written as float32) as the class ids a step takes.
inline std::vector<int32_t> IntLabels(const Tensor& labels) {
  std::vector<int32_t> out;
  for (float v : labels.values()) out.push_back(static_cast<int32_t>(v));
  return out;
}

inline double MaxAbs(const float* a, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(double{a[i]}));
  return m;
}

inline double MaxDiff(const float* a, const float* b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) {
    m = std::max(m, std::fabs(double{a[i]} - b[i]));
  }
  return m;
}

}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_TESTS_TORCH_UTIL_H_
