// TensorParts (see tensor_parts.h).
#include "core/checkpoint/tensor_parts.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace lockstep {

absl::Status TensorParts::Check(const std::string& what,
                                const std::string& name, const Shape& shape,
                                int64_t offset, int64_t n) {
  int64_t elements = 1;  // bounded as it grows: a peer's numbers
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && elements > (int64_t{1} << 40) / d)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor %s: bad shape %s", what, name, ShapeToString(shape)));
    }
    elements *= d;
  }
  if (offset < 0 || n < 0 || offset > elements || n > elements - offset) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: tensor %s: part [%d, %d) outside its shape %s",
                        what, name, offset, offset + n, ShapeToString(shape)));
  }
  return absl::OkStatus();
}

absl::Status TensorParts::Add(const std::string& what, const std::string& name,
                              const Shape& shape, int64_t offset,
                              const float* data, int64_t n) {
  if (absl::Status s = Check(what, name, shape, offset, n); !s.ok()) return s;
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    it = tensors_.emplace(name, Tensor(shape)).first;
  } else if (it->second.shape() != shape) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: a part of %s gives its shape as %s, another part as %s", what,
        name, ShapeToString(shape), ShapeToString(it->second.shape())));
  }
  std::copy(data, data + n, it->second.data() + offset);
  ranges_[name].emplace_back(offset, offset + n);
  return absl::OkStatus();
}

absl::Status TensorParts::CheckCoverage(const std::string& what,
                                        const std::string& kind) const {
  for (const auto& [name, ranges] : ranges_) {
    std::vector<std::pair<int64_t, int64_t>> sorted = ranges;
    std::sort(sorted.begin(), sorted.end());
    int64_t at = 0;
    for (const auto& [begin, end] : sorted) {
      if (begin != at) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: the parts of %s %s %s at element %d", what, kind, name,
            begin < at ? "overlap" : "leave a gap", std::min(at, begin)));
      }
      at = end;
    }
    const int64_t size = tensors_.at(name).size();
    if (at != size) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: the parts of %s %s end at element %d of %d",
                          what, kind, name, at, size));
    }
  }
  return absl::OkStatus();
}

}  // namespace lockstep
