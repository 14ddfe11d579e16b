// Tensor storage helpers.
#include "core/tensor.h"

#include <algorithm>
#include <cassert>
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

}  // namespace lockstep
