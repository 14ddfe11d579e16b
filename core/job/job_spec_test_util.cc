// Job spec test helpers.
#include "core/job/job_spec_test_util.h"

#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace testing {

JobSpec MustParse(const std::string& text, const std::string& base) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(text, base);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : JobSpec();
}

}  // namespace testing
}  // namespace lockstep
