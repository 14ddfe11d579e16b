// The one adapter between nlohmann_json and absl::Status: parsing and dumping
// here never throw, so no JSON exception escapes into the rest of lockstep.
#ifndef LOCKSTEP_CORE_JSON_UTIL_H_
#define LOCKSTEP_CORE_JSON_UTIL_H_

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep {

// Parses `text`. Error (kInvalidArgument), `source` naming the document:
// `job.json: malformed JSON at line 3, column 5: syntax error while parsing
// value - unexpected ','; expected '[', '{', or a literal`.
absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text,
                                         absl::string_view source);
// The same, keeping object keys in document order.
absl::StatusOr<nlohmann::ordered_json> ParseOrderedJson(
    absl::string_view text, absl::string_view source);

// Serializes; invalid UTF-8 in strings is replaced (U+FFFD) instead of
// throwing. indent < 0: one line.
std::string DumpJson(const nlohmann::json& j, int indent = -1);
std::string DumpJson(const nlohmann::ordered_json& j, int indent = -1);

// 1-based line and column of the byte at 0-based `offset` in `text` (clamped
// to the end of the text). Exposed for tests.
void LineAndColumn(absl::string_view text, size_t offset, int64_t* line,
                   int64_t* column);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_JSON_UTIL_H_
