// StepTimes and the --step-times file (see step_times.h).
#include "worker/step_times.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "base/file_util.h"

namespace lockstep {
namespace {

absl::Status OpenError(const std::string& path, int err) {
  return absl::InvalidArgumentError(
      absl::StrFormat("--step-times \"%s\": cannot open for appending: %s",
                      path, std::strerror(err)));
}

}  // namespace

double UnixSeconds() {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  return static_cast<double>(us.count()) * 1e-6;
}

std::string StepTimes::JsonLine(const std::string& job, int64_t generation,
                                int64_t rank) const {
  nlohmann::ordered_json j;
  j["job"] = job;
  j["generation"] = generation;
  j["rank"] = rank;
  j["steps"] = steps_;
  j["times"] = times_;  // shortest round-trip doubles: microseconds survive
  j["ends"] = ends_;
  return j.dump();
}

absl::Status CheckStepTimesFile(const std::string& path) {
  const int fd =
      open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return OpenError(path, errno);
  close(fd);
  return absl::OkStatus();
}

absl::Status AppendStepTimes(const std::string& path, const std::string& line) {
  const int fd =
      open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return OpenError(path, errno);
  const std::string data = line + "\n";
  absl::Status s = WriteAll(fd, data.data(), data.size(), [&](int err) {
    return absl::InternalError(absl::StrFormat(
        "--step-times \"%s\": cannot append: %s", path, std::strerror(err)));
  });
  if (close(fd) != 0 && s.ok()) {
    s = absl::InternalError(absl::StrFormat(
        "--step-times \"%s\": cannot append: %s", path, std::strerror(errno)));
  }
  return s;
}

}  // namespace lockstep
