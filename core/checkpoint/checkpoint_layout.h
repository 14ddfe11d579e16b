// A checkpoint folder's layout, shared by the commit (checkpoint.cc) and
// the restore (checkpoint_load.cc): DIR/step-00001200/{model,optimizer}.
// safetensors, state.json, the data's artifacts (a text job's vocab.txt),
// and DIR/latest naming the newest.
#ifndef LOCKSTEP_CORE_CHECKPOINT_CHECKPOINT_LAYOUT_H_
#define LOCKSTEP_CORE_CHECKPOINT_CHECKPOINT_LAYOUT_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "base/file_util.h"

namespace lockstep {
namespace checkpoint_layout {

inline constexpr char kModelFile[] = "model.safetensors";
inline constexpr char kOptimizerFile[] = "optimizer.safetensors";
inline constexpr char kStateFile[] = "state.json";
inline constexpr char kLatest[] = "latest";
inline constexpr char kTempPrefix[] = ".tmp-";

// A data artifact's file name: letters, digits, '.', '_' and '-', not
// starting with '.', and none of the checkpoint's own files.
inline bool IsArtifactName(const std::string& name) {
  if (name.empty() || name.size() > 128 || name[0] == '.') return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' &&
        c != '_' && c != '-') {
      return false;
    }
  }
  return name != kModelFile && name != kOptimizerFile && name != kStateFile &&
         name != kLatest;
}

inline void RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);  // best effort: leftovers are cleaned next time
}

// "step-00001200" -> 1200; -1 when `name` is not a step folder name.
inline int64_t ParseStepName(const std::string& name) {
  if (!absl::StartsWith(name, "step-") || name.size() == 5) return -1;
  int64_t step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (!absl::ascii_isdigit(name[i])) return -1;
  }
  if (!absl::SimpleAtoi(name.substr(5), &step)) return -1;
  return step;
}

// The committed `latest` pointer's folder name, or "" when unreadable.
inline std::string ReadLatest(const std::string& dir) {
  absl::StatusOr<std::string> s = ReadFile(JoinPath(dir, kLatest));
  if (!s.ok()) return "";
  return std::string(absl::StripAsciiWhitespace(*s));
}

// The leadership term in a temporary folder's name (".tmp-t12-step-..."
// -> 12); 0 for one without (".tmp-step-...": written without a term).
inline int64_t TempTerm(const std::string& name) {
  if (!absl::StartsWith(name, kTempPrefix)) return 0;
  const size_t at = sizeof(kTempPrefix) - 1;
  if (name.size() <= at + 1 || name[at] != 't') return 0;
  const size_t dash = name.find('-', at + 1);
  int64_t term = 0;
  if (dash == std::string::npos ||
      !absl::SimpleAtoi(name.substr(at + 1, dash - at - 1), &term) ||
      term < 0) {
    return 0;
  }
  return term;
}

inline std::string Hex(uint32_t v) { return absl::StrFormat("0x%08x", v); }

}  // namespace checkpoint_layout
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_CHECKPOINT_CHECKPOINT_LAYOUT_H_
