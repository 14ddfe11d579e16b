// Field differences between two jobs, over their canonical JSON.
#include "core/job/job_spec_diff.h"

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/spec_reader.h"

namespace lockstep {
namespace {

using Json = nlohmann::ordered_json;

std::string Value(const Json* v) {
  return v == nullptr ? "absent" : spec_reader::Got(*v);
}

void Diff(const std::string& path, const Json* a, const Json* b,
          std::vector<std::string>* out) {
  if (a != nullptr && b != nullptr && a->is_object() && b->is_object()) {
    for (auto it = a->begin(); it != a->end(); ++it) {
      const Json* other = b->contains(it.key()) ? &(*b)[it.key()] : nullptr;
      Diff(spec_reader::Child(path, it.key()), &it.value(), other, out);
    }
    for (auto it = b->begin(); it != b->end(); ++it) {
      if (!a->contains(it.key())) {
        Diff(spec_reader::Child(path, it.key()), nullptr, &it.value(), out);
      }
    }
    return;
  }
  if (a != nullptr && b != nullptr && a->is_array() && b->is_array() &&
      !a->empty() && (*a)[0].is_object()) {  // lists of layers or inputs
    for (size_t i = 0; i < std::max(a->size(), b->size()); ++i) {
      Diff(spec_reader::Index(path, i), i < a->size() ? &(*a)[i] : nullptr,
           i < b->size() ? &(*b)[i] : nullptr, out);
    }
    return;
  }
  if (a == nullptr || b == nullptr || *a != *b) {
    out->push_back(absl::StrCat(path, " (", Value(a), " -> ", Value(b), ")"));
  }
}

}  // namespace

std::vector<std::string> JobSpecDifferences(const JobSpec& before,
                                            const JobSpec& after,
                                            const std::string& under) {
  const Json a = Json::parse(JobSpecToJson(before), nullptr, false);
  const Json b = Json::parse(JobSpecToJson(after), nullptr, false);
  std::vector<std::string> out;
  Diff("", &a, &b, &out);
  if (under.empty()) return out;
  std::vector<std::string> kept;
  for (const std::string& d : out) {
    if (d.compare(0, under.size(), under) == 0 &&
        (d.size() == under.size() || d[under.size()] == '.' ||
         d[under.size()] == '[' || d[under.size()] == ' ')) {
      kept.push_back(d);
    }
  }
  return kept;
}

std::string JoinDifferences(const std::vector<std::string>& differences,
                            size_t most) {
  std::string out;
  for (size_t i = 0; i < differences.size() && i < most; ++i) {
    absl::StrAppend(&out, i ? ", " : "", differences[i]);
  }
  if (differences.size() > most) {
    absl::StrAppend(&out, " and ", differences.size() - most, " more");
  }
  return out;
}

}  // namespace lockstep
