// Small POSIX file helpers whose errors name the path and the OS reason.
#ifndef LOCKSTEP_CORE_FILE_UTIL_H_
#define LOCKSTEP_CORE_FILE_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace lockstep {

// mkdir -p. Error: `cannot create "/a/b": Not a directory`.
absl::Status MakeDirs(const std::string& path);
// Whole file into a string. NotFound when missing.
absl::StatusOr<std::string> ReadFile(const std::string& path);
// Writes `path.tmp`, fsyncs it, renames over `path`, fsyncs the folder: a
// reader sees the old or the new content, never a mix.
absl::Status WriteFileAtomic(const std::string& path,
                             const std::string& content);
// Directory part of `path` ("." when it has none).
std::string Dirname(const std::string& path);
// a + "/" + b unless b is absolute or a empty.
std::string JoinPath(const std::string& a, const std::string& b);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_FILE_UTIL_H_
