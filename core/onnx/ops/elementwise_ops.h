// Element-wise ONNX ops as op-level nodes, forward and backward on the CPU:
//   onnx_unary  {"op": erf | sqrt | neg | exp | log | reciprocal | abs |
//                clip (with "min", "max") | trunc (a cast to an integer
//                type) | nonzero (a cast to bool) | not | hard_sigmoid
//                (clip(alpha x + beta, 0, 1), with "alpha", "beta") |
//                hard_swish (x relu6(x + 3) / 6)}
//   onnx_binary {"op": add | sub | mul | div | pow | equal | less | greater
//                | less_equal | greater_equal, "a": OPERAND, "b": OPERAND}
//   where an OPERAND is {"input": i} (the layer's input i, a batch),
//   {"const": [values], "shape": [...]}, {"zeros": [...]} (a shape to
//   broadcast to: ONNX Expand), or a parameter {"param", "shape", "owner"}
//   (op_util.h). Shapes broadcast as numpy's, per sample: a constant or a
//   parameter is the same for every sample. Comparisons give 1 or 0 and no
//   gradient; integer values ride in floats (exact below 2^24).
//   onnx_where  {"cond": OPERAND, "a": OPERAND, "b": OPERAND}: a where cond
//               is not 0, else b (a causal mask: masked_fill), the
//               gradient to whichever was taken; no parameter operands.
#ifndef LOCKSTEP_CORE_ONNX_OPS_ELEMENTWISE_OPS_H_
#define LOCKSTEP_CORE_ONNX_OPS_ELEMENTWISE_OPS_H_

#include <string>
#include <vector>

#include "core/layers/layer.h"

namespace lockstep {
namespace onnx_ops {

enum class UnaryKind {
  kErf,
  kSqrt,
  kNeg,
  kExp,
  kLog,
  kReciprocal,
  kAbs,
  kClip,
  kTrunc,
  kNonzero,
  kNot,
  kHardSigmoid,
  kHardSwish
};
enum class BinaryKind {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kEqual,
  kLess,
  kGreater,
  kLessEqual,
  kGreaterEqual
};

class UnaryOp : public Layer {
 public:
  // lo and hi: clip's bounds, or hard_sigmoid's alpha and beta.
  UnaryOp(const std::string& name, const Shape& shape, UnaryKind kind, float lo,
          float hi);
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;

 private:
  const UnaryKind kind_;
  const float lo_, hi_;
};

class BinaryOp : public Layer {
 public:
  struct Operand {
    int input = -1;             // a batch: the layer's input
    std::vector<float> values;  // a constant (empty: zeros)
    Param* param = nullptr;     // or a parameter (LayerIO::w[0])
    bool own_param = false;     // the op's own parameter (not tied)
    Shape shape;                // per sample
  };
  BinaryOp(const std::string& name, std::vector<Shape> inputs, Shape out,
           BinaryKind kind, Operand a, Operand b, Param own);
  std::vector<Param*> params() override;
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;

 private:
  // Operand k's values for sample s.
  const float* Values(const LayerIO& io, int k, int64_t s) const;

  const BinaryKind kind_;
  Operand op_[2];
  std::vector<int64_t> stride_[2];
  Param own_;
};

class WhereOp : public Layer {
 public:
  WhereOp(const std::string& name, std::vector<Shape> inputs, Shape out,
          BinaryOp::Operand cond, BinaryOp::Operand a, BinaryOp::Operand b);
  void Forward(const LayerIO& io, const PassContext& ctx) override;
  void Backward(const LayerIO& io, const PassContext& ctx) override;

 private:
  const float* Values(const LayerIO& io, int k, int64_t s) const;

  // cond, a, b.
  BinaryOp::Operand op_[3];
  // Per output element: its offset in each operand.
  std::vector<int64_t> at_[3];
};

}  // namespace onnx_ops
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_ONNX_OPS_ELEMENTWISE_OPS_H_
