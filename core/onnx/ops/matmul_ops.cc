#include "core/onnx/ops/matmul_ops.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/onnx/ops/op_util.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/threading.h"

namespace lockstep {
namespace onnx_ops {
namespace {

Shape Lead(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

absl::StatusOr<std::unique_ptr<Layer>> CreateMatMul(
    const Json&, const LayerBuildContext& ctx) {
  const Shape& a = ctx.inputs[0];
  const Shape& b = ctx.inputs[1];
  if (a.size() < 2 || b.size() < 2) {
    return ctx.Error(absl::StrCat("a matmul of ", ShapeToString(a), " and ",
                                  ShapeToString(b),
                                  " per sample (each needs 2 axes or more)"));
  }
  if (a.back() != b[b.size() - 2]) {
    return ctx.Error(absl::StrCat("cannot multiply ", ShapeToString(a), " by ",
                                  ShapeToString(b)));
  }
  ASSIGN_OR_RETURN(Shape out, BroadcastShapes(Lead(a), Lead(b), ctx));
  out.push_back(a[a.size() - 2]);
  out.push_back(b.back());
  return std::unique_ptr<Layer>(new MatMulOp(ctx.name, a, b, out));
}

LOCKSTEP_REGISTER_ONNX_OP(matmul, "onnx_matmul", 2, 2, &CreateMatMul);

}  // namespace

MatMulOp::MatMulOp(const std::string& name, const Shape& a, const Shape& b,
                   Shape out)
    : Layer("onnx_matmul", name, {a, b}, std::move(out)),
      m_(a[a.size() - 2]),
      k_(a.back()),
      n_(b.back()) {
  const Shape lead = Lead(output_shape());
  const std::vector<int64_t> sa = BroadcastStrides(Lead(a), lead);
  const std::vector<int64_t> sb = BroadcastStrides(Lead(b), lead);
  ForEachBroadcast(lead, sa, sb, [&](int64_t, int64_t ia, int64_t ib) {
    a_index_.push_back(ia);
    b_index_.push_back(ib);
  });
}

void MatMulOp::Forward(const LayerIO& io, const PassContext& ctx) {
  const int64_t sa = input_size(0), sb = input_size(1), sy = output_size();
  const int64_t count = static_cast<int64_t>(a_index_.size());
  // Samples over the threads (each product small: its GEMM runs inline).
  ParallelFor(io.n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      for (int64_t i = 0; i < count; ++i) {
        Gemm(ctx.precision, false, false, m_, n_, k_, 1.0f,
             io.x[0] + s * sa + a_index_[i] * m_ * k_,
             io.x[1] + s * sb + b_index_[i] * k_ * n_, 0.0f,
             io.y + s * sy + i * m_ * n_);
      }
    }
  });
}

void MatMulOp::Backward(const LayerIO& io, const PassContext& ctx) {
  const int64_t sa = input_size(0), sb = input_size(1), sy = output_size();
  const int64_t count = static_cast<int64_t>(a_index_.size());
  float* da = io.dx[0];
  float* db = io.dx[1];
  if (da != nullptr) std::fill(da, da + io.n * sa, 0.0f);
  if (db != nullptr) std::fill(db, db + io.n * sb, 0.0f);
  ParallelFor(io.n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      for (int64_t i = 0; i < count; ++i) {
        const float* a = io.x[0] + s * sa + a_index_[i] * m_ * k_;
        const float* b = io.x[1] + s * sb + b_index_[i] * k_ * n_;
        const float* dy = io.dy + s * sy + i * m_ * n_;
        // dA (M x K) += dY (M x N) B^T; dB (K x N) += A^T dY.
        if (da != nullptr) {
          Gemm(ctx.precision, false, true, m_, k_, n_, 1.0f, dy, b, 1.0f,
               da + s * sa + a_index_[i] * m_ * k_);
        }
        if (db != nullptr) {
          Gemm(ctx.precision, true, false, k_, n_, m_, 1.0f, a, dy, 1.0f,
               db + s * sb + b_index_[i] * k_ * n_);
        }
      }
    }
  });
}

}  // namespace onnx_ops
}  // namespace lockstep
