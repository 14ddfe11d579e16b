// One line per event for the daemons' logs, as text for people or as JSON
// for log collectors (`--log-format json`), each carrying the job,
// generation, rank and step it concerns.
#ifndef LOCKSTEP_CORE_LOG_H_
#define LOCKSTEP_CORE_LOG_H_

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace lockstep {

struct LogRecord {
  // A plain message converts implicitly, so `log("text")` needs no fields.
  LogRecord(std::string m) : message(std::move(m)) {}  // NOLINT
  LogRecord(const char* m) : message(m) {}             // NOLINT

  std::string message;
  // "warning" or "error" for --log-format json's level; empty: from the
  // message ("warning: ..." and "error: ..." say so), else "info".
  std::string level;
  // Context; unset fields are left out of the line.
  std::string job;
  int64_t generation = -1;
  int rank = -1;
  int64_t step = -1;
};

// Not required to be thread-safe by callers: MakeLogger's is.
using LogFn = std::function<void(const LogRecord&)>;

enum class LogFormat { kText, kJson };

// "text" or "json"; InvalidArgument naming --log-format otherwise.
absl::StatusOr<LogFormat> ParseLogFormat(const std::string& value);

// "warning" for messages that start with "warning", "error" for those that
// start with "error", else "info".
std::string LogLevel(const std::string& message);

// Text: "2026-11-22T10:00:00.123 worker job=mnist gen=2 rank=1 step=300:
// message". JSON (one object per line): {"time": RFC 3339 UTC, "level",
// "component", "job", "generation", "rank", "step", "msg"}, unset context
// fields left out. No trailing newline.
std::string FormatLogLine(const LogRecord& record, const std::string& component,
                          LogFormat format, absl::Time now);

// Writes one line per record to *out (not owned; flushed per line), under
// a lock shared by every logger of the process.
LogFn MakeLogger(const std::string& component, LogFormat format,
                 std::ostream* out);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LOG_H_
