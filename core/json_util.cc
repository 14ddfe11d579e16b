// nlohmann_json behind absl::Status: every JSON exception is caught here.
#include "core/json_util.h"

#include <exception>
#include <limits>
#include <set>
#include <string>
#include <vector>

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

// Deeper documents are refused before nlohmann builds them: every reader
// of JSON here (job files, checkpoints' state, results) nests under 10
// levels, while a hostile 100,000-deep array would overflow the stack of
// any recursive walk over the value (dump() in an error message included).
constexpr int kMaxJsonDepth = 512;

// The first byte where `text` nests deeper than kMaxJsonDepth (brackets
// outside strings), or npos.
size_t TooDeepAt(absl::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return absl::string_view::npos;
}

// A SAX pass for the first key an object repeats (nlohmann keeps the last
// value silently). Its own pass, linear: nlohmann's parse with a callback
// rescans the parent after every object (quadratic in a wide object).
class KeyWatch {
 public:
  using J = nlohmann::json;
  bool null() { return Value(); }
  bool boolean(bool) { return Value(); }
  bool number_integer(J::number_integer_t) { return Value(); }
  bool number_unsigned(J::number_unsigned_t) { return Value(); }
  bool number_float(J::number_float_t, const J::string_t&) { return Value(); }
  bool string(J::string_t&) { return Value(); }
  bool binary(J::binary_t&) { return Value(); }
  bool start_object(std::size_t) {
    frames_.push_back(Frame{true});
    return true;
  }
  bool start_array(std::size_t) {
    frames_.push_back(Frame{false});
    return true;
  }
  bool key(J::string_t& k) {
    if (frames_.empty() || !frames_.back().object) return true;
    Frame& top = frames_.back();
    top.key = k;
    if (!top.keys.insert(k).second) {
      duplicate_ = k;
      duplicate_in_ = Path(frames_.size() - 1);
      return false;  // the first one is the answer: stop
    }
    return true;
  }
  bool end_object() { return End(); }
  bool end_array() { return End(); }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception&) {
    return false;  // the document parse reports it, with its position
  }

  // "" when no object repeats a key; else the error's text.
  std::string Problem() const {
    if (duplicate_.empty()) return "";
    return absl::StrCat("the key \"", duplicate_, "\" appears twice in ",
                        duplicate_in_.empty()
                            ? std::string("the top-level object")
                            : absl::StrCat("\"", duplicate_in_, "\""),
                        " (each key once: which value would count?)");
  }

 private:
  struct Frame {
    bool object = false;
    std::set<std::string> keys;  // an object's
    std::string key;             // an object's current one
    int64_t done = 0;            // an array's elements so far
  };
  // A value ended: an element of the enclosing array.
  bool Value() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().done;
    return true;
  }
  bool End() {
    if (!frames_.empty()) frames_.pop_back();
    return Value();
  }
  // "model.layers[1]": the path to the frame at `depth`.
  std::string Path(size_t depth) const {
    std::string out;
    for (size_t i = 0; i < depth; ++i) {
      const Frame& f = frames_[i];
      if (f.object) {
        absl::StrAppend(&out, out.empty() ? "" : ".", f.key);
      } else {
        absl::StrAppend(&out, "[", f.done, "]");
      }
    }
    return out;
  }

  std::vector<Frame> frames_;
  std::string duplicate_, duplicate_in_;
};

template <typename Json>
absl::StatusOr<Json> ParseImpl(absl::string_view text,
                               absl::string_view source) {
  if (const size_t at = TooDeepAt(text); at != absl::string_view::npos) {
    int64_t line = 0, column = 0;
    LineAndColumn(text, at, &line, &column);
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": JSON nested deeper than ", kMaxJsonDepth,
        " levels at line ", line, ", column ", column));
  }
  try {
    Json doc = Json::parse(text.begin(), text.end());
    KeyWatch keys;
    nlohmann::json::sax_parse(text.begin(), text.end(), &keys);
    if (std::string problem = keys.Problem(); !problem.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": ", problem));
    }
    return doc;
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

template <typename Json>
absl::StatusOr<std::string> DumpStrictImpl(const Json& j, int indent) {
  try {
    return j.dump(indent);
  } catch (const nlohmann::json::exception& e) {  // invalid UTF-8
    return absl::InvalidArgumentError(e.what());
  } catch (const std::exception& e) {  // allocation failure
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot serialize JSON: ", e.what()));
  }
}

absl::Status FieldError(absl::string_view context, absl::string_view problem) {
  if (context.empty()) return absl::InvalidArgumentError(problem);
  return absl::InvalidArgumentError(absl::StrCat(context, ": ", problem));
}

// Numbers and booleans by value, the rest by type: `got -1`, `got string`.
std::string Got(const nlohmann::json& v) {
  if (v.is_number() || v.is_boolean()) return DumpJson(v);
  return v.type_name();
}

absl::Status WrongType(absl::string_view context, absl::string_view key,
                       absl::string_view want, const nlohmann::json& v) {
  return FieldError(context, absl::StrCat("field \"", key, "\" must be ", want,
                                          ", got ", Got(v)));
}

// The unsigned value of `v` when it is a non-negative integer no larger than
// `max`.
bool UnsignedAtMost(const nlohmann::json& v, uint64_t max, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
  } else if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(v.get<int64_t>());
  } else {
    return false;
  }
  return *out <= max;
}

template <typename T>
absl::StatusOr<T> GetUnsigned(const nlohmann::json& obj, absl::string_view key,
                              absl::string_view context,
                              absl::string_view want) {
  absl::StatusOr<const nlohmann::json*> v = GetField(obj, key, context);
  if (!v.ok()) return v.status();
  uint64_t u = 0;
  if (!UnsignedAtMost(**v, std::numeric_limits<T>::max(), &u)) {
    return WrongType(context, key, want, **v);
  }
  return static_cast<T>(u);
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

absl::StatusOr<std::string> DumpJsonStrict(const nlohmann::json& j,
                                           int indent) {
  return DumpStrictImpl(j, indent);
}

absl::StatusOr<std::string> DumpJsonStrict(const nlohmann::ordered_json& j,
                                           int indent) {
  return DumpStrictImpl(j, indent);
}

absl::StatusOr<const nlohmann::json*> GetField(const nlohmann::json& obj,
                                               absl::string_view key,
                                               absl::string_view context) {
  if (!obj.is_object()) {
    return FieldError(context,
                      absl::StrCat("expected an object, got ", Got(obj)));
  }
  auto it = obj.find(std::string(key));
  if (it == obj.end()) {
    return FieldError(context, absl::StrCat("missing field \"", key, "\""));
  }
  return &*it;
}

absl::StatusOr<int64_t> GetInt64(const nlohmann::json& obj,
                                 absl::string_view key,
                                 absl::string_view context) {
  absl::StatusOr<const nlohmann::json*> v = GetField(obj, key, context);
  if (!v.ok()) return v.status();
  const nlohmann::json& x = **v;
  if (x.is_number_integer() &&
      (!x.is_number_unsigned() ||
       x.get<uint64_t>() <=
           static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))) {
    return x.get<int64_t>();
  }
  return WrongType(context, key, "a signed 64-bit integer", x);
}

absl::StatusOr<uint64_t> GetUint64(const nlohmann::json& obj,
                                   absl::string_view key,
                                   absl::string_view context) {
  return GetUnsigned<uint64_t>(obj, key, context, "an unsigned 64-bit integer");
}

absl::StatusOr<uint32_t> GetUint32(const nlohmann::json& obj,
                                   absl::string_view key,
                                   absl::string_view context) {
  return GetUnsigned<uint32_t>(obj, key, context, "an unsigned 32-bit integer");
}

absl::StatusOr<double> GetDouble(const nlohmann::json& obj,
                                 absl::string_view key,
                                 absl::string_view context) {
  absl::StatusOr<const nlohmann::json*> v = GetField(obj, key, context);
  if (!v.ok()) return v.status();
  if (!(*v)->is_number()) return WrongType(context, key, "a number", **v);
  return (*v)->get<double>();
}

absl::StatusOr<std::string> GetString(const nlohmann::json& obj,
                                      absl::string_view key,
                                      absl::string_view context) {
  absl::StatusOr<const nlohmann::json*> v = GetField(obj, key, context);
  if (!v.ok()) return v.status();
  if (!(*v)->is_string()) return WrongType(context, key, "a string", **v);
  return (*v)->get<std::string>();
}

absl::StatusOr<const nlohmann::json*> GetObject(const nlohmann::json& obj,
                                                absl::string_view key,
                                                absl::string_view context) {
  absl::StatusOr<const nlohmann::json*> v = GetField(obj, key, context);
  if (!v.ok()) return v.status();
  if (!(*v)->is_object()) return WrongType(context, key, "an object", **v);
  return *v;
}

}  // namespace lockstep
