// Small POSIX file helpers whose errors name the path and the OS reason.
#ifndef LOCKSTEP_BASE_FILE_UTIL_H_
#define LOCKSTEP_BASE_FILE_UTIL_H_

#include <cstddef>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace lockstep {

// `<op> "<path>": <strerror(err)>`, coded by what the caller can do about it:
// ENOENT kNotFound; EACCES, EPERM, EROFS kPermissionDenied; ENOSPC, EDQUOT
// kResourceExhausted; anything else kInternal.
absl::Status ErrnoToStatus(const std::string& op, const std::string& path,
                           int err);
// Builds a caller's own status (wording and code) from an errno.
using ErrnoToStatusFn = absl::FunctionRef<absl::Status(int err)>;

// mkdir -p. Error: `cannot create "/a/b": Not a directory`.
absl::Status MakeDirs(const std::string& path);
// Whole file into a string. NotFound when missing.
absl::StatusOr<std::string> ReadFile(const std::string& path);
// As above, for callers with their own messages: a failed open(2) returns
// open_error(errno), a failed read(2) read_error(errno).
absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     ErrnoToStatusFn open_error,
                                     ErrnoToStatusFn read_error);
// Writes all `n` bytes to `fd`, retrying interrupted and short writes; a
// write that makes no progress counts as ENOSPC. Failure: error(errno).
absl::Status WriteAll(int fd, const void* data, size_t n,
                      ErrnoToStatusFn error);
// Writes `path.tmp`, fsyncs it, renames over `path`, fsyncs the folder: a
// reader sees the old or the new content, never a mix.
absl::Status WriteFileAtomic(const std::string& path,
                             const std::string& content);
// fsyncs the directory `path`, making the entries created or renamed in it
// durable. Errors: `cannot open "<path>"` / `cannot fsync "<path>"`.
absl::Status FsyncDir(const std::string& path);
// Directory part of `path` ("." when it has none).
std::string Dirname(const std::string& path);
// a + "/" + b unless b is absolute or a empty.
std::string JoinPath(const std::string& a, const std::string& b);
// `path` as an absolute path: joined to the working folder when relative
// ("." and a leading "./" dropped; nothing else is normalized and no link
// followed). Errors: the working folder cannot be read.
absl::StatusOr<std::string> AbsolutePath(const std::string& path);

}  // namespace lockstep

#endif  // LOCKSTEP_BASE_FILE_UTIL_H_
