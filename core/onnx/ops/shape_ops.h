// ONNX ops that move values without computing, as op-level nodes:
//   onnx_reshape   {"shape": [...]}: Reshape, Flatten, Squeeze, Unsqueeze
//                  (per sample; the values stay where they are, so the
//                  executor passes the input through untouched)
//   onnx_transpose {"perm": [...]}: Transpose of the per-sample axes
//                  (ONNX's perm without the batch axis, counted from 0)
#ifndef LOCKSTEP_CORE_ONNX_OPS_SHAPE_OPS_H_
#define LOCKSTEP_CORE_ONNX_OPS_SHAPE_OPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/layers/layer.h"

namespace lockstep {
namespace onnx_ops {

class ReshapeOp : public Layer {
 public:
  ReshapeOp(const std::string& name, const Shape& in, const Shape& out);
  bool PassesThrough(const PassContext&) const override { return true; }
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;
};

class TransposeOp : public Layer {
 public:
  TransposeOp(const std::string& name, const Shape& in,
              std::vector<int64_t> perm);
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;

 private:
  // The output in runs of run_ elements (the trailing axes the perm keeps
  // in place): run r copies from input element source_[r].
  int64_t run_ = 1;
  std::vector<int64_t> source_;
};

}  // namespace onnx_ops
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_ONNX_OPS_SHAPE_OPS_H_
