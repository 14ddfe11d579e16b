// Looking for a job's paths from where the check runs.
#include "core/job/job_paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace lockstep {

std::vector<DataPath> JobPaths(const JobSpec& spec) {
  std::vector<DataPath> out;
  if (spec.data.config != nullptr) out = spec.data.config->Paths();
  if (!spec.model.onnx_path.empty()) {
    out.push_back({"model.onnx", spec.model.onnx_path});
  }
  if (!spec.model.init_safetensors.empty()) {
    out.push_back({"model.init.safetensors", spec.model.init_safetensors});
  }
  return out;
}

absl::Status CheckJobPaths(const JobSpec& spec) {
  std::vector<std::string> problems;
  for (const DataPath& p : JobPaths(spec)) {
    const char* kind = p.folder ? "folder" : "file";
    struct stat st;
    if (stat(p.path.c_str(), &st) != 0) {
      problems.push_back(
          errno == ENOENT
              ? absl::StrCat(p.field, ": no such ", kind, " \"", p.path, "\"")
              : absl::StrCat(p.field, ": \"", p.path,
                             "\" cannot be read: ", strerror(errno)));
      continue;
    }
    if (S_ISDIR(st.st_mode) != p.folder) {
      problems.push_back(absl::StrCat(p.field, ": \"", p.path, "\" is ",
                                      p.folder ? "a file" : "a folder",
                                      ", not a ", kind));
      continue;
    }
    if (access(p.path.c_str(), p.folder ? (R_OK | X_OK) : R_OK) != 0) {
      problems.push_back(absl::StrCat(p.field, ": \"", p.path,
                                      "\" cannot be read: ", strerror(errno)));
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      absl::StrJoin(problems, "; "),
      " (looked for from this machine: if only the workers see the job's "
      "data, submit with --data-on-workers)"));
}

}  // namespace lockstep
