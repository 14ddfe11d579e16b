// POSIX file helpers (errno turned into statuses that name the path).
#include "core/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace {

absl::Status ErrnoStatus(const std::string& what, const std::string& path,
                         int err) {
  std::string msg = absl::StrCat(what, " \"", path, "\": ", strerror(err));
  if (err == ENOENT) return absl::NotFoundError(msg);
  if (err == EACCES || err == EPERM || err == EROFS)
    return absl::PermissionDeniedError(msg);
  if (err == ENOSPC || err == EDQUOT) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

absl::Status FsyncPath(const std::string& path, bool directory) {
  int fd = open(path.c_str(), (directory ? O_DIRECTORY : 0) | O_RDONLY);
  if (fd < 0) return ErrnoStatus("cannot open", path, errno);
  int rc = fsync(fd);
  int err = errno;
  close(fd);
  if (rc != 0) return ErrnoStatus("cannot fsync", path, err);
  return absl::OkStatus();
}

}  // namespace

absl::Status MakeDirs(const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::OkStatus();
    return ErrnoStatus("cannot create", path, ENOTDIR);
  }
  std::string parent = Dirname(path);
  if (parent != path && parent != "." && parent != "/") {
    absl::Status s = MakeDirs(parent);
    if (!s.ok()) return s;
  }
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoStatus("cannot create", path, errno);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return ErrnoStatus("cannot read", path, errno);
  std::string out;
  char buf[1 << 16];
  while (true) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      return ErrnoStatus("cannot read", path, err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

absl::Status WriteFileAtomic(const std::string& path,
                             const std::string& content) {
  const std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return ErrnoStatus("cannot write", tmp, errno);
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      unlink(tmp.c_str());
      return ErrnoStatus("cannot write", tmp, err);
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    int err = errno;
    close(fd);
    unlink(tmp.c_str());
    return ErrnoStatus("cannot fsync", tmp, err);
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return ErrnoStatus("cannot rename to", path, err);
  }
  return FsyncPath(Dirname(path), /*directory=*/true);
}

std::string Dirname(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string JoinPath(const std::string& a, const std::string& b) {
  if (a.empty() || (!b.empty() && b[0] == '/')) return b;
  if (a.back() == '/') return a + b;
  return a + "/" + b;
}

}  // namespace lockstep
