// Constant folding at import: the values an imported graph knows before
// any data arrives — initializers that are no parameter, Constant nodes,
// and what the shape sub-graphs torch exports (Shape, Gather, Unsqueeze,
// Concat, Reshape, ConstantOfShape, Equal, Where, Range...) compute from
// them and from the static per-sample shapes. The batch size is unknown
// until a step: a Shape of a batch reads it as kBatchSize, which may be
// moved about (gathered, concatenated, compared with -1 or itself) but not
// computed with; an op that would is refused as depending on the batch.
#ifndef LOCKSTEP_CORE_ONNX_ONNX_FOLD_H_
#define LOCKSTEP_CORE_ONNX_ONNX_FOLD_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "onnx/onnx_pb.h"

namespace lockstep {

// The batch size where a shape holds it (not a number any tensor holds).
inline constexpr double kBatchSize = -4.5e15;

// Whether a folded value can be a size, an axis or an index: a finite
// integer. A damaged or hostile model's inf, NaN or 2.5 is not, and is
// refused before any cast.
inline bool IsFoldedInt(double v) {
  return std::isfinite(v) && v == std::trunc(v);
}

// A folded integer (IsFoldedInt) as int64, saturated to its range: torch
// writes an open slice end as INT64_MAX, which a double holds as 2^63,
// one past it (a plain cast of that is undefined).
inline int64_t FoldedInt(double v) {
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775807.0) return INT64_MIN;
  return static_cast<int64_t>(v);
}

// The most values a folded tensor holds (and a Trilu's mask, which the
// importer writes out): folding computes shapes, indices and masks, and a
// hostile model's broadcast of two large constants must not allocate
// without bound. A 4096 x 4096 causal mask at most.
inline constexpr int64_t kMaxFoldedValues = int64_t{1} << 24;

// The number of values a shape of `dims` holds, each at least 0; an
// error naming `what` when one is negative or the count passes `limit`
// (checked before each product, so nothing overflows).
absl::StatusOr<int64_t> BoundedCount(const std::vector<int64_t>& dims,
                                     int64_t limit, const std::string& what);

struct Folded {
  Shape dims;             // the ONNX shape; {} for a scalar
  std::vector<double> v;  // row-major
  bool integer = false;   // an integer or bool tensor
};

// An initializer's or a Constant's tensor; error for a type not read
// (float, double, int64, int32, bool are) or data that does not fit.
absl::StatusOr<Folded> FoldTensor(const onnx::TensorProto& t);

// True when `op` can be folded given folded inputs.
bool Foldable(const std::string& op);

// Folds node n whose inputs (those present) are all `in` (null for an
// absent optional input). Errors (without the "model.onnx: node" prefix,
// which the caller adds) say what cannot be folded.
absl::StatusOr<Folded> FoldNode(const onnx::NodeProto& n,
                                const std::vector<const Folded*>& in);

// The shape a Shape node gives for a batch of per-sample shape `s`
// (kBatchSize first), honouring its start and end attributes.
Folded ShapeOf(const onnx::NodeProto& n, const Shape& full);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_ONNX_ONNX_FOLD_H_
