// The one adapter between nlohmann_json and absl::Status: parsing, dumping and
// typed field reads here never throw, so no JSON exception escapes into the
// rest of lockstep.
#ifndef LOCKSTEP_CORE_JSON_UTIL_H_
#define LOCKSTEP_CORE_JSON_UTIL_H_

#include <cstddef>
#include <cstdint>
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
// The same, but invalid UTF-8 is an error (kInvalidArgument, nlohmann's text:
// "[json.exception.type_error.316] invalid UTF-8 byte at index 1: 0xFF").
absl::StatusOr<std::string> DumpJsonStrict(const nlohmann::json& j,
                                           int indent = -1);
absl::StatusOr<std::string> DumpJsonStrict(const nlohmann::ordered_json& j,
                                           int indent = -1);

// Typed members of the object `obj`, never throwing. Errors are
// kInvalidArgument, prefixed "<context>: " when `context` (naming `obj`) is
// non-empty:
//   expected an object, got array                  (`obj` is not an object)
//   missing field "step"
//   field "step" must be a signed 64-bit integer, got string
// Integers must be whole JSON numbers in range: 3.0 is not an integer.

// An integer in [-2^63, 2^63).
absl::StatusOr<int64_t> GetInt64(const nlohmann::json& obj,
                                 absl::string_view key,
                                 absl::string_view context);
// An integer in [0, 2^64).
absl::StatusOr<uint64_t> GetUint64(const nlohmann::json& obj,
                                   absl::string_view key,
                                   absl::string_view context);
// An integer in [0, 2^32): a CRC32C, say.
absl::StatusOr<uint32_t> GetUint32(const nlohmann::json& obj,
                                   absl::string_view key,
                                   absl::string_view context);
// Any number, integers converted. null (how NaN is written) is refused.
absl::StatusOr<double> GetDouble(const nlohmann::json& obj,
                                 absl::string_view key,
                                 absl::string_view context);
// A string, copied.
absl::StatusOr<std::string> GetString(const nlohmann::json& obj,
                                      absl::string_view key,
                                      absl::string_view context);
// The member of any type, or only an object: a pointer into `obj`, valid
// while `obj` is unchanged.
absl::StatusOr<const nlohmann::json*> GetField(const nlohmann::json& obj,
                                               absl::string_view key,
                                               absl::string_view context);
absl::StatusOr<const nlohmann::json*> GetObject(const nlohmann::json& obj,
                                                absl::string_view key,
                                                absl::string_view context);

// 1-based line and column of the byte at 0-based `offset` in `text` (clamped
// to the end of the text). Exposed for tests.
void LineAndColumn(absl::string_view text, size_t offset, int64_t* line,
                   int64_t* column);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_JSON_UTIL_H_
