// ONNX ops that move values without computing, as op-level nodes:
//   onnx_reshape   {"shape": [...]}: Reshape, Flatten, Squeeze, Unsqueeze
//                  (per sample; the values stay where they are, so the
//                  executor passes the input through untouched)
//   onnx_transpose {"perm": [...]}: Transpose of the per-sample axes
//                  (ONNX's perm without the batch axis, counted from 0)
//   onnx_slice     {"axis": a, "start": s, "end": e}: elements s..e-1 along
//                  per-sample axis a (Slice with step 1; each output of a
//                  Split); backward writes the gradient there, 0 elsewhere
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

class SliceOp : public Layer {
 public:
  SliceOp(const std::string& name, const Shape& in, int axis, int64_t start,
          int64_t end);
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;

 private:
  // The input as [outer, size, inner] around the axis; the slice takes
  // [start, start + count) of its middle.
  int64_t outer_ = 1, size_ = 1, inner_ = 1, start_ = 0, count_ = 0;
};

}  // namespace onnx_ops
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_ONNX_OPS_SHAPE_OPS_H_
