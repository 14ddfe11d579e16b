// Ops that combine values along axes, as op-level nodes, forward and
// backward on the CPU:
//   onnx_reduce  {"op": sum | mean, "axes": [...], "keepdims": bool}:
//                ReduceSum / ReduceMean over per-sample axes
//   onnx_softmax {"axis": a, "log": bool}: Softmax or LogSoftmax along any
//                per-sample axis (a softmax along the last axis is an
//                activation layer instead, which the loss may fuse)
//   onnx_concat  {"axis": a}: Concat of batches along a per-sample axis
#ifndef LOCKSTEP_CORE_ONNX_OPS_REDUCE_OPS_H_
#define LOCKSTEP_CORE_ONNX_OPS_REDUCE_OPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/layers/layer.h"

namespace lockstep {
namespace onnx_ops {

class ReduceOp : public Layer {
 public:
  ReduceOp(const std::string& name, const Shape& in, Shape out, bool mean,
           std::vector<int64_t> target);
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;

 private:
  const bool mean_;
  float scale_ = 1;
  // Input element i adds into output element target_[i].
  std::vector<int64_t> target_;
};

class SoftmaxOp : public Layer {
 public:
  SoftmaxOp(const std::string& name, const Shape& in, int axis, bool log);
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;

 private:
  const bool log_;
  // A sample as [outer, size, inner]: softmax along the middle.
  int64_t outer_ = 1, size_ = 1, inner_ = 1;
};

class ConcatOp : public Layer {
 public:
  ConcatOp(const std::string& name, std::vector<Shape> inputs, Shape out,
           int axis);
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;

 private:
  // A sample as [outer, ...]: input k contributes runs of run_[k] values a
  // row, at offset at_[k] of the output's row of row_ values.
  int64_t outer_ = 1, row_ = 0;
  std::vector<int64_t> run_, at_;
};

}  // namespace onnx_ops
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_ONNX_OPS_REDUCE_OPS_H_
