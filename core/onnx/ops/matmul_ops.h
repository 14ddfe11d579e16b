// onnx_matmul: ONNX MatMul of two batches (attention's scores and its
// weighted sum), per sample [..., M, K] x [..., K, N] -> [..., M, N], the
// leading axes broadcast as numpy's; one BLAS GEMM per matrix, forward and
// backward. (A MatMul by a weight is a dense layer: the importer maps it.)
#ifndef LOCKSTEP_CORE_ONNX_OPS_MATMUL_OPS_H_
#define LOCKSTEP_CORE_ONNX_OPS_MATMUL_OPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/layers/layer.h"

namespace lockstep {
namespace onnx_ops {

class MatMulOp : public Layer {
 public:
  MatMulOp(const std::string& name, const Shape& a, const Shape& b, Shape out);
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;

 private:
  int64_t m_, k_, n_;
  // Per output matrix: the matrices of a and b it multiplies.
  std::vector<int64_t> a_index_, b_index_;
};

}  // namespace onnx_ops
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_ONNX_OPS_MATMUL_OPS_H_
