// Whole tensors put together from parts, each a run of a tensor's elements
// (sharded optimizer state: the ranks' parts of a checkpoint, and the parts
// a failed generation's survivors kept in memory), with the check that the
// parts cover every tensor exactly once.
#ifndef LOCKSTEP_CORE_CHECKPOINT_TENSOR_PARTS_H_
#define LOCKSTEP_CORE_CHECKPOINT_TENSOR_PARTS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/tensor.h"

namespace lockstep {

// Not thread-safe.
class TensorParts {
 public:
  // Elements [offset, offset + n) of tensor `name`, whose whole shape is
  // `shape` (the first part allocates it, zeroed). InvalidArgument, naming
  // `what` and the tensor, when `shape` is not a shape of at most 2^40
  // elements, differs from another part's, or the part lies outside it;
  // nothing is kept then.
  absl::Status Add(const std::string& what, const std::string& name,
                   const Shape& shape, int64_t offset, const float* data,
                   int64_t n);
  // Add's checks of the shape and the part's bounds alone (nothing is
  // allocated): for a caller that verifies everything before keeping
  // anything.
  static absl::Status Check(const std::string& what, const std::string& name,
                            const Shape& shape, int64_t offset, int64_t n);
  // OK when every tensor's parts cover it exactly once; else
  // InvalidArgument "WHAT: the parts of KIND NAME overlap|leave a gap at
  // element E" or "... end at element E of N" for the first that does not.
  absl::Status CheckCoverage(const std::string& what,
                             const std::string& kind) const;
  // The tensors by name (moved out by the caller when complete).
  std::map<std::string, Tensor>& tensors() { return tensors_; }
  bool empty() const { return tensors_.empty(); }

 private:
  std::map<std::string, Tensor> tensors_;
  // Per tensor, the [begin, end) element ranges received.
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> ranges_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_CHECKPOINT_TENSOR_PARTS_H_
