// The files and folders a job reads (its data, its initial weights), and
// the check `lockstep check` and `submit` make before anything starts: a
// missing or unreadable path is named there, not on a rank mid-job.
#ifndef LOCKSTEP_CORE_JOB_JOB_PATHS_H_
#define LOCKSTEP_CORE_JOB_JOB_PATHS_H_

#include <vector>

#include "absl/status/status.h"
#include "core/data/data_format.h"
#include "core/job/job_spec.h"

namespace lockstep {

// Every path the job reads, by field: the data format's and
// model.init.safetensors.
std::vector<DataPath> JobPaths(const JobSpec& spec);

// InvalidArgument naming every path that does not exist here, cannot be
// read, or is a file where a folder belongs (and the other way round):
// "data.train_path: no such file \"/d/train.csv\"; data.test_path: ...".
absl::Status CheckJobPaths(const JobSpec& spec);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_JOB_JOB_PATHS_H_
