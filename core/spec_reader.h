// Reading one JSON object of a spec (a job file, a layer) with errors that
// name the offending field's JSON path: "model.layers[1].units: must be an
// integer >= 1, got 0". Nothing here throws (nlohmann's exceptions stay in
// core/json_util).
#ifndef LOCKSTEP_CORE_SPEC_READER_H_
#define LOCKSTEP_CORE_SPEC_READER_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace lockstep {
namespace spec_reader {

using Json = nlohmann::ordered_json;
using Keys = std::vector<std::string>;

inline constexpr int64_t kMaxInt = std::numeric_limits<int64_t>::max();

// JSON names of an enum's values, in the order error messages list them.
template <typename T>
using Table = std::vector<std::pair<const char*, T>>;

template <typename T>
std::string NameOf(const Table<T>& table, T value) {
  for (const auto& [name, v] : table) {
    if (v == value) return name;
  }
  return "?";
}

// The offending value as JSON text, shortened so a message stays one line.
std::string Got(const Json& v);
// kInvalidArgument "<path>: <problem>".
absl::Status Bad(const std::string& path, absl::string_view problem);
// "a.b" and "a[3]": the JSON path of a member or an element.
std::string Child(const std::string& path, absl::string_view key);
std::string Index(const std::string& path, size_t i);

// What a number must satisfy, and how the error says it.
struct Constraint {
  const char* text;
  bool (*ok)(double);
};
extern const Constraint kPositive;     // > 0
extern const Constraint kNonNegative;  // >= 0
extern const Constraint kUnitOpen;     // [0, 1)
extern const Constraint kUnitClosed;   // [0, 1]

absl::Status IntValue(const Json& v, const std::string& path, int64_t min,
                      int64_t max, int64_t* out);
absl::Status NumberValue(const Json& v, const std::string& path,
                         const Constraint& c, double* out);
// "kernel_size": 3 or [3, 5].
absl::Status PairValue(const Json& v, const std::string& path, int64_t* h,
                       int64_t* w);

// One JSON object under validation; remembers its path for messages. Holds a
// reference to the object, which must outlive it.
class Reader {
 public:
  Reader(const Json& obj, std::string path)
      : obj_(obj), path_(std::move(path)) {}

  static absl::Status CheckObject(const Json& v, const std::string& path);

  const Json& object() const { return obj_; }
  const std::string& path() const { return path_; }
  std::string At(absl::string_view key) const { return Child(path_, key); }
  bool Has(const char* key) const { return obj_.contains(key); }
  // The member, or null when absent (callers check Has or Require first);
  // never throws.
  const Json& Get(const char* key) const;

  // Rejects keys outside `allowed`; keys in `elsewhere` belong to another
  // variant, which the message says (`unknown field for <variant>`).
  absl::Status CheckKeys(const Keys& allowed, const Keys& elsewhere = {},
                         absl::string_view variant = "") const;
  absl::Status Require(const char* key, absl::string_view why = "") const;

  // The readers below leave *out alone when the key is absent.
  absl::Status Int(const char* key, int64_t min, int64_t* out,
                   int64_t max = kMaxInt) const;
  absl::Status Uint(const char* key, uint64_t* out) const;
  absl::Status Number(const char* key, const Constraint& c, double* out) const;
  absl::Status Bool(const char* key, bool* out) const;
  absl::Status String(const char* key, std::string* out) const;
  // A non-empty string; relative paths are resolved against `base_dir`.
  absl::Status Path(const char* key, absl::string_view base_dir,
                    std::string* out) const;
  template <typename T>
  absl::Status Enum(const char* key, absl::string_view what,
                    const Table<T>& table, T* out) const;
  absl::Status Pair(const char* key, int64_t* h, int64_t* w) const;
  // A non-empty array of strings (or one string, read as a list of one).
  absl::Status Strings(const char* key, std::vector<std::string>* out) const;

 private:
  const Json& obj_;
  std::string path_;
};

template <typename T>
absl::Status Reader::Enum(const char* key, absl::string_view what,
                          const Table<T>& table, T* out) const {
  if (!Has(key)) return absl::OkStatus();
  const Json& v = Get(key);
  if (!v.is_string()) {
    return Bad(At(key), absl::StrCat("must be a string, got ", Got(v)));
  }
  const std::string s = v.get<std::string>();
  std::vector<std::string> names;
  for (const auto& [name, value] : table) {
    if (s == name) {
      *out = value;
      return absl::OkStatus();
    }
    names.push_back(name);
  }
  return Bad(At(key),
             absl::StrCat("unknown ", what, " ", Got(v), "; expected one of ",
                          absl::StrJoin(names, ", ")));
}

// Names a folder, a layer or a checkpoint key, so it must be a plain file
// name: [A-Za-z0-9_.-]{1,64}, not "." or "..".
absl::Status CheckName(const std::string& name, const std::string& path);

}  // namespace spec_reader
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_SPEC_READER_H_
