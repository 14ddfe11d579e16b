// The job document (lockstep submit/train/check, the coordinator's
// SubmitJob): any bytes parse to a valid JobSpec or are refused with a
// message; a parsed spec's canonical JSON parses back to the same spec and
// the same canonical text.
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "core/job/job_spec.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<JobSpec> spec = ParseJobSpec(text);
  fuzz::CheckRefusal(spec.status());
  if (!spec.ok()) return 0;
  const std::string canonical = JobSpecToJson(*spec);
  absl::StatusOr<JobSpec> again = ParseJobSpec(canonical);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(*again == *spec);
  FUZZ_CHECK(JobSpecToJson(*again) == canonical);
  return 0;
}
