// What the IDX and CSV dataset tests share: paths under the test's temp
// folder, files written byte for byte, and the check of a load's error.
#ifndef LOCKSTEP_CORE_DATA_DATASET_TEST_UTIL_H_
#define LOCKSTEP_CORE_DATA_DATASET_TEST_UTIL_H_

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/data/dataset.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace testing {

// `name` in $TEST_TMPDIR (else /tmp).
inline std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

// Writes `bytes` to `path` as they are (no compression).
inline void WriteRaw(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), bytes.size());
  ASSERT_TRUE(out.good()) << path;
}

// `got` is an error with `code` and exactly `message`.
inline void ExpectError(const absl::StatusOr<Dataset>& got,
                        absl::StatusCode code, const std::string& message) {
  ASSERT_FALSE(got.ok()) << "expected: " << message;
  EXPECT_EQ(got.status().code(), code) << got.status();
  EXPECT_EQ(got.status().message(), message);
}

}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_DATA_DATASET_TEST_UTIL_H_
