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

// Writes `size` bytes to a file of this process named `name` in
// ScratchDir() (overwritten each call, then cut to `size`: truncating to 0
// first costs milliseconds a run on some file systems) and returns its path.
inline std::string WriteScratch(const std::string& name, const uint8_t* data,
                                size_t size) {
  const std::string path = ScratchDir() + "/fuzz_" +
                           std::to_string(static_cast<long>(getpid())) + "_" +
                           name;
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  FUZZ_CHECK(fd >= 0);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = pwrite(fd, data + done, size - done, done);
    FUZZ_CHECK(n > 0);
    done += static_cast<size_t>(n);
  }
  FUZZ_CHECK(ftruncate(fd, static_cast<off_t>(size)) == 0);
  FUZZ_CHECK(close(fd) == 0);
  return path;
}

}  // namespace fuzz
}  // namespace lockstep

#endif  // LOCKSTEP_TESTS_FUZZ_FUZZ_UTIL_H_
