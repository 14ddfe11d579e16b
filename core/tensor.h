// Dense float32 tensors on the host, and named trainable parameters. Layouts
// are row-major; images are NHWC (Keras' channels_last), batch first.
#ifndef LOCKSTEP_CORE_TENSOR_H_
#define LOCKSTEP_CORE_TENSOR_H_

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep {

using Shape = std::vector<int64_t>;

// Number of elements of `shape` (1 for a scalar, 0 if any dim is 0).
int64_t NumElements(const Shape& shape);
// "[28, 28, 1]".
std::string ShapeToString(const Shape& shape);

// Owns its storage. Copyable (deep copy) and movable.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape);  // zero-filled
  Tensor(Shape shape, std::vector<float> values);  // values.size() must match

  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i]; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t size() const { return static_cast<int64_t>(data_.size()); }
  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  std::vector<float>& values() { return data_; }
  const std::vector<float>& values() const { return data_; }

  // Reshapes and zero-fills only when the shape changes (buffers are reused
  // across steps without reallocation).
  void Resize(const Shape& shape);
  // Changes the shape, keeping the data; element counts must match.
  void Reshape(const Shape& shape);
  void SetZero();

 private:
  Shape shape_;
  std::vector<float> data_;
};

// Hands the whole memory pages inside [begin, begin + count) back to the
// kernel (madvise MADV_DONTNEED on private anonymous memory, which a
// Tensor's storage is): they stop counting in the process's resident
// memory and read as zeros until written again. The partial pages at either
// end are left alone. Returns the bytes handed back (cluster.shard
// "gradients": a worker's gradients outside its part, between steps).
int64_t ReleasePages(float* begin, int64_t count);

// How a training step changes a parameter.
enum class ParamUpdate {
  // The optimizer, from the gradient backward accumulates.
  kOptimizer,
  // A moving average of a batch statistic (batch norm's running mean and
  // variance): backward accumulates into `grad` the statistic times the
  // samples it came from, the step sums that over replicas and workers like
  // a gradient, and then value = value * momentum + (1 - momentum) *
  // grad / (samples in the global batch) (UpdateMovingAverages,
  // core/train/optimizer.h). No optimizer state, no weight decay, no clipping.
  kMovingAverage,
  // Never: a frozen layer's (trainable: false).
  kFrozen,
};

// A named parameter: its value and the gradient accumulated by backward.
// Names are stable and unique within a model ("dense_1/kernel"): they key
// checkpoints and optimizer state.
struct Param {
  std::string name;
  Tensor value;
  Tensor grad;
  ParamUpdate update = ParamUpdate::kOptimizer;
  float momentum = 0;  // kMovingAverage only
};

// Elements [begin, begin + size) of the parameter params[param] of some
// list of parameters (a sharded optimizer's owned part).
struct ParamRange {
  int param = 0;
  int64_t begin = 0;
  int64_t size = 0;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_TENSOR_H_
