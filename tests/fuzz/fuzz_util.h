// Shared by the fuzz targets (tests/fuzz): checks that abort (so libFuzzer
// and the replay both report the input) and a scratch file for readers that
// take a path.
#ifndef LOCKSTEP_TESTS_FUZZ_FUZZ_UTIL_H_
#define LOCKSTEP_TESTS_FUZZ_FUZZ_UTIL_H_

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"

// Aborts, naming the condition, when it does not hold.
#define FUZZ_CHECK(cond)                                                  \
  do {                                                                    \
    if (!(cond)) {                                                        \
      std::fprintf(stderr, "fuzz check failed: %s (%s:%d)\n", #cond,      \
                   __FILE__, __LINE__);                                   \
      std::abort();                                                       \
    }                                                                     \
  } while (0)

namespace lockstep {
namespace fuzz {

// A refusal must say what is wrong: a Status that is not OK carries a
// message.
inline void CheckRefusal(const absl::Status& s) {
  if (!s.ok() && s.message().empty()) {
    std::fprintf(stderr, "fuzz check failed: %s without a message\n",
                 absl::StatusCodeToString(s.code()).c_str());
    std::abort();
  }
}

// The folder for scratch files: $TEST_TMPDIR (Bazel), else /tmp.
inline std::string ScratchDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t != nullptr && *t != '\0' ? t : "/tmp";
}

// Replaces the content of `path` with `size` bytes in place: written over
// the old bytes, then cut to `size`. Truncating to 0 first makes ext4 free
// and reallocate the blocks, milliseconds a run, most of a target's time.
inline void OverwriteFile(const std::string& path, const uint8_t* data,
                          size_t size) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  FUZZ_CHECK(fd >= 0);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = pwrite(fd, data + done, size - done, done);
    FUZZ_CHECK(n > 0);
    done += static_cast<size_t>(n);
  }
  FUZZ_CHECK(ftruncate(fd, static_cast<off_t>(size)) == 0);
  FUZZ_CHECK(close(fd) == 0);
}

inline void OverwriteFile(const std::string& path, const std::string& bytes) {
  OverwriteFile(path, reinterpret_cast<const uint8_t*>(bytes.data()),
                bytes.size());
}

// Writes `size` bytes to a file of this process named `name` in
// ScratchDir() (OverwriteFile) and returns its path.
inline std::string WriteScratch(const std::string& name, const uint8_t* data,
                                size_t size) {
  const std::string path = ScratchDir() + "/fuzz_" +
                           std::to_string(static_cast<long>(getpid())) + "_" +
                           name;
  OverwriteFile(path, data, size);
  return path;
}

}  // namespace fuzz
}  // namespace lockstep

#endif  // LOCKSTEP_TESTS_FUZZ_FUZZ_UTIL_H_
