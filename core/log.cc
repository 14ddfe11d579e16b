// Log line formatting (see log.h).
#include "core/log.h"

#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace lockstep {

absl::StatusOr<LogFormat> ParseLogFormat(const std::string& value) {
  if (value == "text") return LogFormat::kText;
  if (value == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(absl::StrCat(
      "--log-format: must be \"text\" or \"json\", got \"", value, "\""));
}

std::string LogLevel(const std::string& message) {
  if (absl::StartsWithIgnoreCase(message, "warning")) return "warning";
  if (absl::StartsWithIgnoreCase(message, "error")) return "error";
  return "info";
}

std::string FormatLogLine(const LogRecord& r, const std::string& component,
                          LogFormat format, absl::Time now) {
  if (format == LogFormat::kJson) {
    nlohmann::ordered_json j;
    j["time"] =
        absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", now, absl::UTCTimeZone());
    j["level"] = r.level.empty() ? LogLevel(r.message) : r.level;
    j["component"] = component;
    if (!r.job.empty()) j["job"] = r.job;
    if (r.generation >= 0) j["generation"] = r.generation;
    if (r.rank >= 0) j["rank"] = r.rank;
    if (r.step >= 0) j["step"] = r.step;
    j["msg"] = r.message;
    // Invalid UTF-8 (a peer's bytes quoted in a message) is replaced, never
    // thrown on.
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  std::string line = absl::StrCat(
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3S", now, absl::LocalTimeZone()), " ",
      component);
  std::string context;
  if (!r.job.empty()) absl::StrAppend(&context, " job=", r.job);
  if (r.generation >= 0) absl::StrAppend(&context, " gen=", r.generation);
  if (r.rank >= 0) absl::StrAppend(&context, " rank=", r.rank);
  if (r.step >= 0) absl::StrAppend(&context, " step=", r.step);
  if (!context.empty()) absl::StrAppend(&line, context, ":");
  absl::StrAppend(&line, " ", r.message);
  return line;
}

LogFn MakeLogger(const std::string& component, LogFormat format,
                 std::ostream* out) {
  return [component, format, out](const LogRecord& r) {
    static std::mutex mu;
    const std::string line = FormatLogLine(r, component, format, absl::Now());
    std::lock_guard<std::mutex> lock(mu);
    *out << line << std::endl;
  };
}

}  // namespace lockstep
