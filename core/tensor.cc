// Tensor storage helpers.
#include "core/tensor.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <utility>

#include "absl/strings/str_join.h"

namespace lockstep {

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) {
  return "[" + absl::StrJoin(shape, ", ") + "]";
}

Tensor::Tensor(Shape shape)
    : shape_(std::move(shape)), data_(NumElements(shape_), 0.0f) {}

Tensor::Tensor(Shape shape, std::vector<float> values)
    : shape_(std::move(shape)), data_(std::move(values)) {
  assert(static_cast<int64_t>(data_.size()) == NumElements(shape_));
}

void Tensor::Resize(const Shape& shape) {
  if (shape == shape_) return;
  shape_ = shape;
  data_.assign(NumElements(shape_), 0.0f);
}

void Tensor::Reshape(const Shape& shape) {
  assert(NumElements(shape) == static_cast<int64_t>(data_.size()));
  shape_ = shape;
}

void Tensor::SetZero() { std::fill(data_.begin(), data_.end(), 0.0f); }

int64_t ReleasePages(float* begin, int64_t count) {
  if (count <= 0) return 0;
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t from = reinterpret_cast<uintptr_t>(begin);
  const uintptr_t to = reinterpret_cast<uintptr_t>(begin + count);
  const uintptr_t first = (from + page - 1) / page * page;
  const uintptr_t last = to / page * page;
  if (last <= first) return 0;
  // Cannot fail on a mapped, page-aligned range of the process's own
  // anonymous memory; if it did, the pages would simply stay resident.
  if (madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) !=
      0) {
    return 0;
  }
  return static_cast<int64_t>(last - first);
}

}  // namespace lockstep
