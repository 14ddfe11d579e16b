// nlohmann_json behind absl::Status: every JSON exception is caught here.
#include "core/json_util.h"

#include <exception>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace lockstep {
namespace {

// nlohmann's what() reads "[json.exception.parse_error.101] parse error at
// line 1, column 2: <reason>"; keep only the reason (we compute the position).
std::string ParseReason(const char* what) {
  absl::string_view w(what);
  size_t bracket = w.find("] ");
  if (bracket != absl::string_view::npos) w.remove_prefix(bracket + 2);
  size_t column = w.find("column ");
  size_t colon = w.find(": ", column == absl::string_view::npos ? 0 : column);
  if (colon != absl::string_view::npos) w.remove_prefix(colon + 2);
  return std::string(w);
}

template <typename Json>
absl::StatusOr<Json> ParseImpl(absl::string_view text,
                               absl::string_view source) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte counts the characters read, so the offending one is at byte-1.
    int64_t line = 0, column = 0;
    LineAndColumn(text, e.byte > 0 ? e.byte - 1 : 0, &line, &column);
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": malformed JSON at line ", line, ", column ",
                     column, ": ", ParseReason(e.what())));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": cannot parse JSON: ", e.what()));
  }
}

template <typename Json>
std::string DumpImpl(const Json& j, int indent) {
  try {
    return j.dump(indent, ' ', /*ensure_ascii=*/false,
                  nlohmann::json::error_handler_t::replace);
  } catch (const std::exception&) {
    // Only allocation failure is left; an empty document is the safe answer.
    return "null";
  }
}

}  // namespace

void LineAndColumn(absl::string_view text, size_t offset, int64_t* line,
                   int64_t* column) {
  if (offset > text.size()) offset = text.size();
  int64_t l = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++l;
      line_start = i + 1;
    }
  }
  *line = l;
  *column = static_cast<int64_t>(offset - line_start) + 1;
}

absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text,
                                         absl::string_view source) {
  return ParseImpl<nlohmann::json>(text, source);
}

absl::StatusOr<nlohmann::ordered_json> ParseOrderedJson(
    absl::string_view text, absl::string_view source) {
  return ParseImpl<nlohmann::ordered_json>(text, source);
}

std::string DumpJson(const nlohmann::json& j, int indent) {
  return DumpImpl(j, indent);
}

std::string DumpJson(const nlohmann::ordered_json& j, int indent) {
  return DumpImpl(j, indent);
}

}  // namespace lockstep
