// Serving a job's files: confined paths, chunked CRC-checked reads.
#include "coordinator/job_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <random>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/file_util.h"
#include "base/status_macros.h"

namespace lockstep {
namespace {

namespace v1 = lockstep::v1;

// Closes on scope exit.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      if (fd_ >= 0) close(fd_);
      fd_ = o.fd_;
      o.fd_ = -1;
    }
    return *this;
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

uint32_t Crc32(uint32_t crc, const char* data, size_t n) {
  return static_cast<uint32_t>(
      crc32_z(crc, reinterpret_cast<const Bytef*>(data), n));
}

// The components of a relative path: no empty, ".", ".." or hidden
// component, no leading '/', no NUL. `what` names it in the error.
absl::StatusOr<std::vector<std::string>> Components(const std::string& path,
                                                    bool allow_empty) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("path \"", path, "\": ", why,
                     " (a path inside the job's folder, as ListJobFiles "
                     "names it: \"result.json\", "
                     "\"checkpoints/step-00000100/model.safetensors\")"));
  };
  std::vector<std::string> parts;
  if (path.empty()) {
    if (allow_empty) return parts;
    return bad("empty");
  }
  if (path.find('\0') != std::string::npos) return bad("holds a NUL byte");
  if (path[0] == '/') return bad("absolute");
  for (absl::string_view part :
       absl::StrSplit(absl::StripSuffix(path, "/"), '/')) {
    if (part.empty()) return bad("an empty component");
    if (part == "." || part == "..") return bad("leaves the job's folder");
    if (part[0] == '.') return bad("a hidden name (a file being written)");
    parts.emplace_back(part);
  }
  return parts;
}

// Opens `parts` under `job_dir` one component at a time without following
// a symbolic link; the last one a directory (`dir`) or a regular file.
absl::StatusOr<Fd> OpenInside(const std::string& job_dir,
                              const std::vector<std::string>& parts,
                              const std::string& path, bool dir) {
  Fd at(open(job_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (at.get() < 0) {
    return absl::NotFoundError(absl::StrCat(
        "the job's folder ", job_dir, " cannot be opened: ", strerror(errno)));
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    const bool last = i + 1 == parts.size();
    int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC;
    if (!last || dir) flags |= O_DIRECTORY;
    Fd next(openat(at.get(), parts[i].c_str(), flags));
    if (next.get() < 0) {
      const int err = errno;
      if (err == ENOENT) {
        return absl::NotFoundError(absl::StrCat("path \"", path,
                                                "\": no such file in the job's "
                                                "folder"));
      }
      if (err == ELOOP || err == ENOTDIR) {
        return absl::InvalidArgumentError(
            absl::StrCat("path \"", path, "\": \"", parts[i], "\" is ",
                         err == ELOOP ? "a symbolic link" : "not a folder",
                         " (only the job's own files are served)"));
      }
      return ErrnoToStatus("open", JoinPath(job_dir, path), err);
    }
    at = std::move(next);
  }
  return at;
}

void ListInto(int dir_fd, const std::string& prefix,
              std::vector<v1::JobFile>* out) {
  DIR* d = fdopendir(dup(dir_fd));
  if (d == nullptr) return;
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;  // ".", "..", temporary folders
    names.emplace_back(e->d_name);
  }
  closedir(d);
  for (const std::string& name : names) {
    struct stat st;
    if (fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    const std::string rel = prefix + name;
    if (S_ISREG(st.st_mode)) {
      v1::JobFile f;
      f.set_path(rel);
      f.set_size(st.st_size);
      f.set_modified_unix_seconds(st.st_mtim.tv_sec +
                                  st.st_mtim.tv_nsec * 1e-9);
      out->push_back(std::move(f));
    } else if (S_ISDIR(st.st_mode)) {
      Fd sub(openat(dir_fd, name.c_str(),
                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub.get() >= 0) ListInto(sub.get(), rel + "/", out);
    }
  }
}

// Reads [from, to) of `fd` through `each(data, n)`, in pieces of at most
// `piece` bytes. DataLoss when the file ends early (truncated meanwhile).
absl::Status ReadRange(
    int fd, const std::string& path, int64_t from, int64_t to, int64_t piece,
    std::string* buf,
    const std::function<bool(int64_t, const char*, size_t)>& each) {
  for (int64_t at = from; at < to;) {
    const size_t want = static_cast<size_t>(std::min(piece, to - at));
    buf->resize(want);
    size_t got = 0;
    while (got < want) {
      const ssize_t n = pread(fd, buf->data() + got, want - got, at + got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoToStatus("read", path, errno);
      if (n == 0) {
        return absl::DataLossError(absl::StrFormat(
            "path \"%s\": the file ended at byte %d while being read (it "
            "was truncated)",
            path, at + got));
      }
      got += static_cast<size_t>(n);
    }
    if (!each(at, buf->data(), want)) {
      return absl::CancelledError("the client left");
    }
    at += static_cast<int64_t>(want);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> LoadOrCreateStorageId(const std::string& storage) {
  const std::string dir = JoinPath(storage, "coordinator");
  RETURN_IF_ERROR(MakeDirs(dir));
  const std::string path = JoinPath(dir, "storage_id");
  absl::StatusOr<std::string> have = ReadFile(path);
  if (have.ok()) {
    std::string id(absl::StripAsciiWhitespace(*have));
    if (id.size() == 32) return id;
  }
  std::random_device rd;
  std::string id;
  for (int i = 0; i < 4; ++i) {
    absl::StrAppend(&id, absl::StrFormat("%08x", rd()));
  }
  RETURN_IF_ERROR(WriteFileAtomic(path, id + "\n"));
  return id;
}

absl::StatusOr<std::string> MoveJobResultsAside(const std::string& job_dir) {
  std::string aside;
  for (const char* name :
       {"checkpoints", "summaries", "result.json", "audit.jsonl"}) {
    const std::string from = JoinPath(job_dir, name);
    struct stat st;
    if (lstat(from.c_str(), &st) != 0) continue;
    if (aside.empty()) {
      aside = JoinPath(job_dir, absl::StrCat("previous-", time(nullptr)));
      for (int i = 1; access(aside.c_str(), F_OK) == 0; ++i) {
        aside =
            JoinPath(job_dir, absl::StrCat("previous-", time(nullptr), "-", i));
      }
      RETURN_IF_ERROR(MakeDirs(aside));
    }
    const std::string to = JoinPath(aside, name);
    if (rename(from.c_str(), to.c_str()) != 0) {
      return ErrnoToStatus("move aside", from, errno);
    }
  }
  return aside;
}

absl::StatusOr<v1::ListJobFilesResponse> ListJobFiles(
    const std::string& job_dir, const std::string& prefix) {
  ASSIGN_OR_RETURN(std::vector<std::string> parts,
                   Components(prefix, /*allow_empty=*/true));
  v1::ListJobFilesResponse resp;
  absl::StatusOr<Fd> dir = OpenInside(job_dir, parts, prefix, /*dir=*/true);
  if (absl::IsNotFound(dir.status())) return resp;  // nothing there yet
  if (!dir.ok()) return dir.status();
  std::string rel;
  for (const std::string& p : parts) absl::StrAppend(&rel, p, "/");
  std::vector<v1::JobFile> files;
  ListInto(dir->get(), rel, &files);
  std::sort(files.begin(), files.end(),
            [](const v1::JobFile& a, const v1::JobFile& b) {
              return a.path() < b.path();
            });
  for (v1::JobFile& f : files) *resp.add_files() = std::move(f);
  return resp;
}

absl::Status ReadJobFile(
    const std::string& job_dir, const std::string& path, int64_t offset,
    int64_t expect_size, int64_t chunk_bytes,
    const std::function<bool(const v1::FileChunk&)>& write) {
  ASSIGN_OR_RETURN(std::vector<std::string> parts,
                   Components(path, /*allow_empty=*/false));
  ASSIGN_OR_RETURN(Fd fd, OpenInside(job_dir, parts, path, /*dir=*/false));
  struct stat st;
  if (fstat(fd.get(), &st) != 0) {
    return ErrnoToStatus("stat", JoinPath(job_dir, path), errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("path \"", path, "\": not a regular file"));
  }
  const int64_t size = st.st_size;
  if (offset < 0 || offset > size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("path \"%s\": offset %d is outside the file's %d bytes",
                        path, offset, size));
  }
  if (expect_size > 0 && size < expect_size) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "path \"%s\" changed since the transfer began: it holds %d bytes, "
        "%d were announced (read it again from the start)",
        path, size, expect_size));
  }
  chunk_bytes = std::clamp<int64_t>(chunk_bytes, 1, kJobFileChunkBytes);
  std::string buf;
  // The whole file's CRC covers what came before `offset` too.
  uint32_t file_crc = Crc32(0, nullptr, 0);
  RETURN_IF_ERROR(ReadRange(fd.get(), path, 0, offset, kJobFileChunkBytes, &buf,
                            [&](int64_t, const char* d, size_t n) {
                              file_crc = Crc32(file_crc, d, n);
                              return true;
                            }));
  v1::FileChunk chunk;
  chunk.set_file_size(size);
  RETURN_IF_ERROR(ReadRange(fd.get(), path, offset, size, chunk_bytes, &buf,
                            [&](int64_t at, const char* d, size_t n) {
                              file_crc = Crc32(file_crc, d, n);
                              chunk.set_offset(at);
                              chunk.set_data(d, n);
                              chunk.set_crc32(
                                  Crc32(Crc32(0, nullptr, 0), d, n));
                              if (at + static_cast<int64_t>(n) == size) {
                                chunk.set_last(true);
                                chunk.set_file_crc32(file_crc);
                              }
                              return write(chunk);
                            }));
  if (offset == size) {  // nothing left to send: the closing chunk alone
    chunk.set_offset(size);
    chunk.set_crc32(Crc32(0, nullptr, 0));
    chunk.set_last(true);
    chunk.set_file_crc32(file_crc);
    if (!write(chunk)) return absl::CancelledError("the client left");
  }
  return absl::OkStatus();
}

}  // namespace lockstep
