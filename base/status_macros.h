// RETURN_IF_ERROR / ASSIGN_OR_RETURN for absl::Status: Debian's Abseil
// (20220623) ships none. Keep every fallible call site short and add context
// with absl::Status annotations at each hop (see AnnotateStatus).
#ifndef LOCKSTEP_BASE_STATUS_MACROS_H_
#define LOCKSTEP_BASE_STATUS_MACROS_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace lockstep {

// Returns `status` with `context` prepended to its message ("while X: msg"),
// keeping the code. OK stays OK.
inline absl::Status AnnotateStatus(const absl::Status& status,
                                   absl::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(context, ": ", status.message()));
}

}  // namespace lockstep

#define LOCKSTEP_STATUS_CONCAT_INNER_(a, b) a##b
#define LOCKSTEP_STATUS_CONCAT_(a, b) LOCKSTEP_STATUS_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                         \
  do {                                                \
    const ::absl::Status _lockstep_status = (expr);   \
    if (!_lockstep_status.ok()) return _lockstep_status; \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, rexpr)                                      \
  ASSIGN_OR_RETURN_IMPL_(LOCKSTEP_STATUS_CONCAT_(_lockstep_or, __LINE__), \
                         lhs, rexpr)

#define ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                           \
  if (!statusor.ok()) return statusor.status();      \
  lhs = std::move(statusor).value()

#endif  // LOCKSTEP_BASE_STATUS_MACROS_H_
