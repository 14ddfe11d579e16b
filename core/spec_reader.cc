// The field readers of core/spec_reader.h.
#include "core/spec_reader.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/json_util.h"

namespace lockstep {
namespace spec_reader {
namespace {

bool Contains(const Keys& keys, const std::string& k) {
  for (const std::string& x : keys) {
    if (x == k) return true;
  }
  return false;
}

}  // namespace

// The offending value as JSON text, shortened so a message stays one line.
std::string Got(const Json& v) {
  std::string s = DumpJson(v);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

absl::Status Bad(const std::string& path, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", problem));
}

std::string Child(const std::string& path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

std::string Index(const std::string& path, size_t i) {
  return absl::StrCat(path, "[", i, "]");
}

const Constraint kPositive{"must be > 0", [](double d) { return d > 0; }};
const Constraint kNonNegative{"must be >= 0", [](double d) { return d >= 0; }};
const Constraint kUnitOpen{"must be in [0, 1)",
                           [](double d) { return d >= 0 && d < 1; }};
const Constraint kUnitClosed{"must be in [0, 1]",
                             [](double d) { return d >= 0 && d <= 1; }};

absl::Status IntValue(const Json& v, const std::string& path, int64_t min,
                      int64_t max, int64_t* out) {
  bool ok = v.is_number_integer();
  int64_t x = 0;
  if (ok && v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    ok = u <= static_cast<uint64_t>(kMaxInt);
    x = static_cast<int64_t>(u);
  } else if (ok) {
    x = v.get<int64_t>();
  }
  if (!ok || x < min || x > max) {
    std::string want =
        max == kMaxInt
            ? absl::StrCat("must be an integer >= ", min)
            : absl::StrCat("must be an integer in [", min, ", ", max, "]");
    return Bad(path, absl::StrCat(want, ", got ", Got(v)));
  }
  *out = x;
  return absl::OkStatus();
}

absl::Status NumberValue(const Json& v, const std::string& path,
                         const Constraint& c, double* out) {
  if (!v.is_number()) {
    return Bad(path, absl::StrCat("must be a number, got ", Got(v)));
  }
  double d = v.get<double>();
  if (!c.ok(d)) return Bad(path, absl::StrCat(c.text, ", got ", Got(v)));
  *out = d;
  return absl::OkStatus();
}

absl::Status PairValue(const Json& v, const std::string& path, int64_t* h,
                       int64_t* w) {
  auto fine = [](const Json& x) {
    if (x.is_number_unsigned()) {
      const uint64_t u = x.get<uint64_t>();
      return u >= 1 && u <= static_cast<uint64_t>(kMaxInt);
    }
    return x.is_number_integer() && x.get<int64_t>() >= 1;
  };
  if (fine(v)) {
    *h = *w = v.get<int64_t>();
    return absl::OkStatus();
  }
  if (v.is_array() && v.size() == 2 && fine(v[0]) && fine(v[1])) {
    *h = v[0].get<int64_t>();
    *w = v[1].get<int64_t>();
    return absl::OkStatus();
  }
  return Bad(path, absl::StrCat("must be an integer >= 1 or a pair [h, w] of "
                                "them, got ",
                                Got(v)));
}

const Json& Reader::Get(const char* key) const {
  static const Json* const kNull = new Json();
  auto it = obj_.find(key);
  return it == obj_.end() ? *kNull : *it;
}

absl::Status Reader::CheckObject(const Json& v, const std::string& path) {
  if (v.is_object()) return absl::OkStatus();
  return Bad(path, absl::StrCat("must be an object, got ", Got(v)));
}

absl::Status Reader::CheckKeys(const Keys& allowed, const Keys& elsewhere,
                               absl::string_view variant) const {
  for (auto it = obj_.begin(); it != obj_.end(); ++it) {
    if (Contains(allowed, it.key())) continue;
    if (Contains(elsewhere, it.key())) {
      return Bad(At(it.key()), absl::StrCat("unknown field for ", variant));
    }
    return Bad(At(it.key()), "unknown field");
  }
  return absl::OkStatus();
}

absl::Status Reader::Require(const char* key, absl::string_view why) const {
  if (Has(key)) return absl::OkStatus();
  return Bad(At(key), why.empty() ? std::string("required")
                                  : absl::StrCat("required for ", why));
}

absl::Status Reader::Int(const char* key, int64_t min, int64_t* out,
                         int64_t max) const {
  if (!Has(key)) return absl::OkStatus();
  return IntValue(Get(key), At(key), min, max, out);
}

absl::Status Reader::Uint(const char* key, uint64_t* out) const {
  if (!Has(key)) return absl::OkStatus();
  const Json& v = Get(key);
  if (v.is_number_unsigned() ||
      (v.is_number_integer() && v.get<int64_t>() >= 0)) {
    *out = v.get<uint64_t>();
    return absl::OkStatus();
  }
  return Bad(At(key),
             absl::StrCat("must be a non-negative integer, got ", Got(v)));
}

absl::Status Reader::Number(const char* key, const Constraint& c,
                            double* out) const {
  if (!Has(key)) return absl::OkStatus();
  return NumberValue(Get(key), At(key), c, out);
}

absl::Status Reader::Bool(const char* key, bool* out) const {
  if (!Has(key)) return absl::OkStatus();
  const Json& v = Get(key);
  if (!v.is_boolean()) {
    return Bad(At(key), absl::StrCat("must be true or false, got ", Got(v)));
  }
  *out = v.get<bool>();
  return absl::OkStatus();
}

absl::Status Reader::String(const char* key, std::string* out) const {
  if (!Has(key)) return absl::OkStatus();
  const Json& v = Get(key);
  if (!v.is_string()) {
    return Bad(At(key), absl::StrCat("must be a string, got ", Got(v)));
  }
  *out = v.get<std::string>();
  return absl::OkStatus();
}

absl::Status Reader::Path(const char* key, absl::string_view base_dir,
                          std::string* out) const {
  if (!Has(key)) return absl::OkStatus();
  std::string s;
  RETURN_IF_ERROR(String(key, &s));
  if (s.empty()) return Bad(At(key), "must not be empty");
  if (s[0] != '/' && !base_dir.empty()) {
    s = absl::StrCat(base_dir, base_dir.back() == '/' ? "" : "/", s);
  }
  *out = std::move(s);
  return absl::OkStatus();
}

absl::Status Reader::Pair(const char* key, int64_t* h, int64_t* w) const {
  if (!Has(key)) return absl::OkStatus();
  return PairValue(Get(key), At(key), h, w);
}

absl::Status CheckName(const std::string& name, const std::string& path) {
  bool ok = !name.empty() && name.size() <= 64;
  for (char c : name) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-');
  }
  if (!ok) {
    return Bad(path, absl::StrCat("must match [A-Za-z0-9_.-]{1,64}, got ",
                                  Got(Json(name))));
  }
  if (name == "." || name == "..") {
    return Bad(path, absl::StrCat("must not be \".\" or \"..\", got ",
                                  Got(Json(name))));
  }
  return absl::OkStatus();
}

absl::Status Reader::Strings(const char* key,
                             std::vector<std::string>* out) const {
  if (!Has(key)) return absl::OkStatus();
  const Json& v = Get(key);
  std::vector<std::string> list;
  if (v.is_string()) {
    list.push_back(v.get<std::string>());
  } else if (v.is_array() && !v.empty()) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string()) {
        return Bad(Index(At(key), i),
                   absl::StrCat("must be a string, got ", Got(v[i])));
      }
      list.push_back(v[i].get<std::string>());
    }
  } else {
    return Bad(At(key), absl::StrCat("must be a string or a non-empty array "
                                     "of strings, got ",
                                     Got(v)));
  }
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].empty()) {
      return Bad(v.is_array() ? Index(At(key), i) : At(key),
                 "must not be empty");
    }
  }
  *out = std::move(list);
  return absl::OkStatus();
}

}  // namespace spec_reader
}  // namespace lockstep
