// ParseDeviceList: one pass over the comma-separated entries.
#include "kernels/cuda/device_list.h"

#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace lockstep {
namespace {

bool AllDigits(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// The number after "kind:" in `entry`; errors name the entry.
absl::StatusOr<int> ParseIndex(absl::string_view entry,
                               absl::string_view number) {
  if (number.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("device entry '", entry, "' has no number after ':'"));
  }
  int value = 0;
  if (number[0] == '-' && AllDigits(number.substr(1))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device entry '", entry, "' has a negative number ", number));
  }
  if (!AllDigits(number) || !absl::SimpleAtoi(number, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("device entry '", entry, "': '", number,
                     "' is not a non-negative integer"));
  }
  return value;
}

DeviceList AllVisible(int visible) {
  std::vector<int> ordinals;
  for (int i = 0; i < visible; ++i) ordinals.push_back(i);
  return DeviceList::Cuda(std::move(ordinals));
}

}  // namespace

DeviceList DeviceList::Cpu(int replicas) {
  DeviceList list;
  list.kind = DeviceKind::kCpu;
  list.cpu_replicas = replicas;
  return list;
}

DeviceList DeviceList::Cuda(std::vector<int> ordinals) {
  DeviceList list;
  list.kind = DeviceKind::kCuda;
  list.cuda_ordinals = std::move(ordinals);
  return list;
}

std::string DeviceList::ToString() const {
  if (kind == DeviceKind::kCpu) return absl::StrCat("cpu:", cpu_replicas);
  return absl::StrJoin(cuda_ordinals, ",", [](std::string* out, int i) {
    absl::StrAppend(out, "cuda:", i);
  });
}

bool DeviceList::operator==(const DeviceList& other) const {
  if (kind != other.kind) return false;
  return kind == DeviceKind::kCpu ? cpu_replicas == other.cpu_replicas
                                  : cuda_ordinals == other.cuda_ordinals;
}

absl::StatusOr<DeviceList> ParseDeviceList(absl::string_view spec,
                                           int visible_cuda_devices,
                                           const DeviceList& fallback) {
  spec = absl::StripAsciiWhitespace(spec);
  if (spec.empty()) {
    if (visible_cuda_devices > 0) return AllVisible(visible_cuda_devices);
    return fallback;
  }
  std::vector<int> ordinals;
  std::set<int> seen;
  bool saw_cpu = false;
  bool saw_cuda = false;
  int cpu_replicas = 0;
  for (absl::string_view raw : absl::StrSplit(spec, ',')) {
    const absl::string_view entry = absl::StripAsciiWhitespace(raw);
    if (entry.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("device list '", spec, "' has an empty entry"));
    }
    const size_t colon = entry.find(':');
    const absl::string_view kind = entry.substr(0, colon);
    if (kind == "cpu") {
      if (saw_cpu || saw_cuda) {
        return absl::InvalidArgumentError(absl::StrCat(
            "device entry '", entry, "': cpu:N stands alone (",
            saw_cpu ? "a second cpu entry" : "it cannot be mixed with cuda",
            ") in '", spec, "'"));
      }
      saw_cpu = true;
      if (colon == absl::string_view::npos) {
        return absl::InvalidArgumentError(absl::StrCat(
            "device entry '", entry, "' needs a replica count: cpu:N"));
      }
      absl::StatusOr<int> n = ParseIndex(entry, entry.substr(colon + 1));
      if (!n.ok()) return n.status();
      if (*n < 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "device entry '", entry, "': cpu:N needs at least 1 replica"));
      }
      cpu_replicas = *n;
    } else if (kind == "cuda") {
      if (saw_cpu) {
        return absl::InvalidArgumentError(
            absl::StrCat("device entry '", entry,
                         "': cuda cannot be mixed with cpu in '", spec, "'"));
      }
      saw_cuda = true;
      if (colon == absl::string_view::npos) {  // bare "cuda": every GPU
        if (visible_cuda_devices <= 0) {
          return absl::FailedPreconditionError(
              "device entry 'cuda' asks for every GPU, but none is visible");
        }
        for (int i = 0; i < visible_cuda_devices; ++i) {
          if (!seen.insert(i).second) {
            return absl::InvalidArgumentError(absl::StrCat(
                "device entry 'cuda' repeats cuda:", i, " in '", spec, "'"));
          }
          ordinals.push_back(i);
        }
        continue;
      }
      absl::StatusOr<int> index = ParseIndex(entry, entry.substr(colon + 1));
      if (!index.ok()) return index.status();
      if (!seen.insert(*index).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            "device entry '", entry, "' is listed twice in '", spec, "'"));
      }
      if (*index >= visible_cuda_devices) {
        return absl::FailedPreconditionError(
            visible_cuda_devices <= 0
                ? absl::StrCat("device entry '", entry,
                               "': no CUDA device is visible")
                : absl::StrCat("device entry '", entry, "': only ",
                               visible_cuda_devices,
                               " CUDA device(s) are visible (cuda:0..cuda:",
                               visible_cuda_devices - 1, ")"));
      }
      ordinals.push_back(*index);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("device entry '", entry,
                       "': unknown device kind (want cuda:I or cpu:N)"));
    }
  }
  if (saw_cpu) return DeviceList::Cpu(cpu_replicas);
  return DeviceList::Cuda(std::move(ordinals));
}

}  // namespace lockstep
