// Gathers as op-level nodes:
//   onnx_gather_elements {"axis": a}: ONNX GatherElements of a batch by a
//       batch of indices (integer values), along per-sample axis a; an
//       index out of range (after adding the axis' size to a negative one)
//       reads 0 and gets no gradient. Backward scatters (adds).
//   onnx_gather_rows {"param", "shape", "owner", "indices": [...],
//       "indices_shape": [...]}: ONNX Gather of a parameter table's rows at
//       constant indices (BERT's position embeddings: the rows 0..L-1),
//       the same for every sample; its one input only sets the batch.
//       Backward adds every sample's gradient into the rows.
// (A Gather of a table by a batch of ids is an embedding layer.)
#ifndef LOCKSTEP_CORE_ONNX_OPS_GATHER_OPS_H_
#define LOCKSTEP_CORE_ONNX_OPS_GATHER_OPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/layers/layer.h"

namespace lockstep {
namespace onnx_ops {

class GatherElementsOp : public Layer {
 public:
  GatherElementsOp(const std::string& name, const Shape& data,
                   const Shape& indices, int axis);
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;

 private:
  // data's offset of output element o with its axis-`axis` index 0, and
  // that axis' stride and size in data.
  std::vector<int64_t> base_;
  int64_t stride_ = 1, size_ = 1;
};

class GatherRowsOp : public Layer {
 public:
  GatherRowsOp(const std::string& name, const Shape& input, Shape out,
               Param own, Param* table, std::vector<int64_t> rows);
  std::vector<Param*> params() override { return {table_}; }
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;

 private:
  Param own_;
  Param* table_;
  std::vector<int64_t> rows_;
};

}  // namespace onnx_ops
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_ONNX_OPS_GATHER_OPS_H_
