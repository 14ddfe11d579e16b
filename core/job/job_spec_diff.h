// What two versions of a job differ in, field by field, so that a refusal
// can name them: "optimizer.learning_rate (0.001 -> 0.002)".
#ifndef LOCKSTEP_CORE_JOB_JOB_SPEC_DIFF_H_
#define LOCKSTEP_CORE_JOB_JOB_SPEC_DIFF_H_

#include <string>
#include <vector>

#include "core/job/job_spec.h"

namespace lockstep {

// The leaf fields whose canonical values differ (defaults filled in, so a
// field given with its default value is no difference), each as
// "path (old -> new)" with "absent" for a missing side, in the job file's
// order. Only fields under `under` ("model") when it is not empty.
std::vector<std::string> JobSpecDifferences(const JobSpec& before,
                                            const JobSpec& after,
                                            const std::string& under = "");

// "a (1 -> 2), b (x -> y)" of at most `most` entries, then "and N more".
std::string JoinDifferences(const std::vector<std::string>& differences,
                            size_t most = 6);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_JOB_JOB_SPEC_DIFF_H_
