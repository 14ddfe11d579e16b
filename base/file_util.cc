// POSIX file helpers (errno turned into statuses that name the path).
#include "base/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace lockstep {

absl::Status ErrnoToStatus(const std::string& op, const std::string& path,
                           int err) {
  std::string msg = absl::StrCat(op, " \"", path, "\": ", strerror(err));
  if (err == ENOENT) return absl::NotFoundError(msg);
  if (err == EACCES || err == EPERM || err == EROFS)
    return absl::PermissionDeniedError(msg);
  if (err == ENOSPC || err == EDQUOT) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

absl::Status MakeDirs(const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::OkStatus();
    return ErrnoToStatus("cannot create", path, ENOTDIR);
  }
  std::string parent = Dirname(path);
  if (parent != path && parent != "." && parent != "/") {
    absl::Status s = MakeDirs(parent);
    if (!s.ok()) return s;
  }
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoToStatus("cannot create", path, errno);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  auto error = [&path](int err) {
    return ErrnoToStatus("cannot read", path, err);
  };
  return ReadFile(path, error, error);
}

absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     ErrnoToStatusFn open_error,
                                     ErrnoToStatusFn read_error) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return open_error(errno);
  std::string out;
  char buf[1 << 16];
  while (true) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      return read_error(err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

absl::Status WriteAll(int fd, const void* data, size_t n,
                      ErrnoToStatusFn error) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return error(errno);
    }
    if (w == 0) return error(ENOSPC);
    p += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomic(const std::string& path,
                             const std::string& content) {
  const std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoToStatus("cannot write", tmp, errno);
  absl::Status s = WriteAll(fd, content.data(), content.size(), [&](int err) {
    return ErrnoToStatus("cannot write", tmp, err);
  });
  if (s.ok() && fsync(fd) != 0) s = ErrnoToStatus("cannot fsync", tmp, errno);
  close(fd);
  if (!s.ok()) {
    unlink(tmp.c_str());
    return s;
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return ErrnoToStatus("cannot rename to", path, err);
  }
  return FsyncDir(Dirname(path));
}

absl::Status FsyncDir(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus("cannot open", path, errno);
  int rc = fsync(fd);
  int err = errno;
  close(fd);
  if (rc != 0) return ErrnoToStatus("cannot fsync", path, err);
  return absl::OkStatus();
}

std::string Dirname(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

absl::StatusOr<std::string> AbsolutePath(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char buf[4096];
  if (getcwd(buf, sizeof(buf)) == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read the working folder: ", strerror(errno)));
  }
  std::string rest = path;
  // "./", ".//" and so on: the separators after a leading "." are
  // redundant (the path was relative), not a root.
  while (rest.rfind("./", 0) == 0) {
    rest = rest.substr(2);
    while (!rest.empty() && rest[0] == '/') rest = rest.substr(1);
  }
  if (rest == ".") rest.clear();
  return rest.empty() ? std::string(buf) : JoinPath(buf, rest);
}

std::string JoinPath(const std::string& a, const std::string& b) {
  if (a.empty() || (!b.empty() && b[0] == '/')) return b;
  if (a.back() == '/') return a + b;
  return a + "/" + b;
}

}  // namespace lockstep
